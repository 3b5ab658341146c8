package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unsafe"
)

// Routing: patterns with the path rules of net/http's ServeMux (Go 1.22,
// pattern.go and routing_tree.go), parsed once by Handle into one tree per
// method, and matched without allocating: a wildcard's value is a slice of
// the request's path (or of the worker's scratch space when the segment
// was percent-encoded).
//
// What is ServeMux's: literal segments, {name} for one segment, a final
// {name...} for the rest of the path (it also matches an empty rest: the
// path "/files/"), {$}; the most specific pattern wins, and two patterns
// of which neither is more specific than the other (they overlap, or are
// the same) are refused when the second is registered, naming both.
// Methods as in ServeMux: a request is matched against the patterns of its
// own method first, then (for HEAD) those of GET, then those registered
// for every method (""), and the first pattern found wins.
//
// What differs, on purpose: a pattern ending in "/" matches that path
// exactly ("/a/" is ServeMux's "/a/{$}"): a trailing slash is not a
// subtree, so that exact paths mean what they meant before patterns
// existed; "/a/{rest...}" is the subtree. There are no host patterns, and
// paths are not cleaned or redirected: "/a//b" and "/a/./b" are matched as
// they are (an empty segment matches no {name}).

// maxWildcards bounds the wildcards of one pattern, so that their values
// fit in a fixed array of the Ctx.
const maxWildcards = 16

// segment is one part of a pattern's path between slashes.
type segment struct {
	s     string // the literal (percent-decoded), or the wildcard's name
	wild  bool   // {s} or {s...}
	multi bool   // {s...}: the rest of the path
}

// pattern is a parsed route pattern.
type pattern struct {
	method string // "" for every method
	path   string // as registered
	segs   []segment
	names  []string // the wildcards' names, in order
	exact  bool     // no wildcard: matches one path only
	label  string   // String(), made once (Ctx.Pattern)
}

func (p *pattern) String() string {
	if p.method == "" {
		return p.path
	}
	return p.method + " " + p.path
}

// parsePattern parses a route's path pattern.
func parsePattern(method, path string) (*pattern, error) {
	if method != "" && !validMethod(method) {
		return nil, fmt.Errorf("invalid method %q", method)
	}
	if path == "" || path[0] != '/' {
		return nil, errors.New("path must begin with '/'")
	}
	p := &pattern{method: method, path: path, exact: true}
	rest := path[1:]
	for {
		seg := rest
		i := strings.IndexByte(rest, '/')
		if i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		}
		last := i < 0
		if !strings.ContainsAny(seg, "{}") {
			if seg == "" && !last {
				return nil, errors.New("empty segment")
			}
			dec, ok := unescapeString(seg)
			if !ok {
				return nil, fmt.Errorf("bad percent-encoding in %q", seg)
			}
			p.segs = append(p.segs, segment{s: dec})
		} else {
			if seg[0] != '{' || seg[len(seg)-1] != '}' {
				return nil, fmt.Errorf("bad wildcard segment %q (must be a whole segment)", seg)
			}
			name := seg[1 : len(seg)-1]
			if name == "$" {
				if !last {
					return nil, errors.New("{$} not at the end")
				}
				p.segs = append(p.segs, segment{}) // the path's trailing slash
				break
			}
			name, multi := strings.CutSuffix(name, "...")
			if multi && !last {
				return nil, errors.New("{...} wildcard not at the end")
			}
			if !validWildcardName(name) {
				return nil, fmt.Errorf("bad wildcard name %q", name)
			}
			for _, n := range p.names {
				if n == name {
					return nil, fmt.Errorf("duplicate wildcard name %q", name)
				}
			}
			if len(p.names) == maxWildcards {
				return nil, fmt.Errorf("more than %d wildcards", maxWildcards)
			}
			p.names = append(p.names, name)
			p.segs = append(p.segs, segment{s: name, wild: true, multi: multi})
			p.exact = false
		}
		if last {
			break
		}
	}
	p.label = p.String()
	return p, nil
}

// validWildcardName: a Go identifier, as in ServeMux.
func validWildcardName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !unicode.IsLetter(c) && c != '_' && (i == 0 || !unicode.IsDigit(c)) {
			return false
		}
	}
	return true
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !isTchar(m[i]) {
			return false
		}
	}
	return m != ""
}

func isTchar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// relationship is how the sets of requests two patterns match compare
// (ServeMux's terms).
type relationship uint8

const (
	equivalent   relationship = iota // the same requests
	moreGeneral                      // a superset
	moreSpecific                     // a subset
	disjoint                         // no request in common
	overlaps                         // some in common, neither a subset
)

func inverse(r relationship) relationship {
	switch r {
	case moreGeneral:
		return moreSpecific
	case moreSpecific:
		return moreGeneral
	}
	return r
}

// combine is the relationship of two patterns from those of two of their
// independent parts (method and path, or two segments).
func combine(r1, r2 relationship) relationship {
	switch r1 {
	case equivalent:
		return r2
	case disjoint:
		return disjoint
	case overlaps:
		if r2 == disjoint {
			return disjoint
		}
		return overlaps
	}
	// r1 is moreGeneral or moreSpecific.
	switch r2 {
	case equivalent:
		return r1
	case inverse(r1):
		return overlaps
	}
	return r2
}

func compareMethods(m1, m2 string) relationship {
	switch {
	case m1 == m2:
		return equivalent
	case m1 == "":
		return moreGeneral
	case m2 == "":
		return moreSpecific
	case m1 == "GET" && m2 == "HEAD":
		return moreGeneral // a GET pattern also answers HEAD
	case m1 == "HEAD" && m2 == "GET":
		return moreSpecific
	}
	return disjoint
}

func compareSegments(s1, s2 segment) relationship {
	switch {
	case s1.wild && s2.wild:
		return equivalent
	case s1.wild:
		if s2.s == "" {
			return disjoint // {x} matches no empty segment (a trailing slash)
		}
		return moreGeneral
	case s2.wild:
		if s1.s == "" {
			return disjoint
		}
		return moreSpecific
	case s1.s == s2.s:
		return equivalent
	}
	return disjoint
}

// comparePaths compares the paths two patterns match. A multi wildcard
// matches one or more segments (the rest of the path after a slash, which
// may be empty), so a pattern that ends where the other goes on into a
// multi wildcard matches none of its paths.
func comparePaths(p1, p2 *pattern) relationship {
	rel := equivalent
	i := 0
	for ; i < len(p1.segs) && i < len(p2.segs); i++ {
		s1, s2 := p1.segs[i], p2.segs[i]
		if s1.multi || s2.multi {
			break
		}
		if rel = combine(rel, compareSegments(s1, s2)); rel == disjoint {
			return disjoint
		}
	}
	switch {
	case i == len(p1.segs) && i == len(p2.segs):
		return rel
	case i == len(p1.segs) || i == len(p2.segs):
		return disjoint // one ended, the other needs more segments
	case p1.segs[i].multi && p2.segs[i].multi:
		return rel
	case p1.segs[i].multi:
		return combine(rel, moreGeneral)
	case p2.segs[i].multi:
		return combine(rel, moreSpecific)
	}
	return rel
}

// conflicts reports whether p1 and p2 may not both be registered: they
// match the same requests, or some of the same and neither is more
// specific.
func conflicts(p1, p2 *pattern) bool {
	m := compareMethods(p1.method, p2.method)
	if m == disjoint {
		return false
	}
	r := combine(m, comparePaths(p1, p2))
	return r == equivalent || r == overlaps
}

// leaf is a registered route.
type leaf struct {
	pat     *pattern
	h       Handler
	maxBody int64 // the route's body limit; 0: the server's

	deferTimeout time.Duration // RouteOptions.DeferTimeout
}

// node is a position in a method's tree.
type node struct {
	// The literal children: up to maxLitSlice in two slices, compared in
	// turn (a segment is short, and comparing a few costs less than
	// hashing it), more in a map.
	litKeys  []string
	litNodes []*node
	litMap   map[string]*node
	wild     *node // {name}
	multi    *node // {name...}: always a leaf
	leaf     *leaf
}

const maxLitSlice = 8

// lit returns the literal child for seg, or nil.
func (n *node) lit(seg []byte) *node {
	if n.litMap != nil {
		return n.litMap[string(seg)]
	}
	for i, k := range n.litKeys {
		if k == string(seg) {
			return n.litNodes[i]
		}
	}
	return nil
}

// addLit returns the literal child for s, made if new.
func (n *node) addLit(s string) *node {
	if c := n.lit([]byte(s)); c != nil {
		return c
	}
	c := &node{}
	if n.litMap != nil {
		n.litMap[s] = c
		return c
	}
	n.litKeys = append(n.litKeys, s)
	n.litNodes = append(n.litNodes, c)
	if len(n.litKeys) > maxLitSlice {
		n.litMap = make(map[string]*node, len(n.litKeys))
		for i, k := range n.litKeys {
			n.litMap[k] = n.litNodes[i]
		}
		n.litKeys, n.litNodes = nil, nil
	}
	return c
}

func (n *node) add(segs []segment, l *leaf) {
	for _, s := range segs {
		var c **node
		switch {
		case s.multi:
			c = &n.multi
		case s.wild:
			c = &n.wild
		default:
			n = n.addLit(s.s)
			continue
		}
		if *c == nil {
			*c = &node{}
		}
		n = *c
	}
	n.leaf = l
}

// methodTree holds the patterns of one method ("" for every method).
type methodTree struct {
	method string
	root   node
	exact  []*leaf // its patterns without wildcards, for conflict checks
}

// exactRoute holds the exact-path patterns of one path, by method: the
// fast path of a request for an exact path (see router.find).
type exactRoute struct {
	path    string
	methods []string
	leaves  []*leaf
	// get is lookup("GET"), for serve to take without comparing the
	// method's three bytes by a call to memequal (24 instructions,
	// cachegrind); nil when the path has no GET pattern.
	get *leaf
}

func (r *exactRoute) lookup(method []byte) *leaf {
	for i, m := range r.methods {
		if equalShort(method, m) {
			return r.leaves[i]
		}
	}
	return nil
}

// router is every registered pattern. It is written by Handle before
// Start and only read after, by every worker.
type router struct {
	trees []*methodTree // in the order their methods were first registered
	exact map[string]*exactRoute
	wild  []*leaf // the patterns with wildcards, for conflict checks
	// lowLimits: some route lowers the body limit, so a request with a
	// body is routed as soon as its head is in (Server.bodyLimit).
	lowLimits bool
}

func (rt *router) tree(method string) *methodTree {
	for _, t := range rt.trees {
		if t.method == method {
			return t
		}
	}
	return nil
}

// add registers l, or returns an error naming the pattern it conflicts
// with.
func (rt *router) add(l *leaf) error {
	p := l.pat
	if err := rt.checkConflicts(p); err != nil {
		return err
	}
	t := rt.tree(p.method)
	if t == nil {
		t = &methodTree{method: p.method}
		rt.trees = append(rt.trees, t)
	}
	t.root.add(p.segs, l)
	if p.exact {
		t.exact = append(t.exact, l)
		if rt.exact == nil {
			rt.exact = make(map[string]*exactRoute)
		}
		key := exactKey(p)
		r := rt.exact[key]
		if r == nil {
			r = &exactRoute{path: key}
			rt.exact[key] = r
		}
		r.methods = append(r.methods, p.method)
		r.leaves = append(r.leaves, l)
		if p.method == "GET" && r.get == nil {
			r.get = l
		}
	} else {
		rt.wild = append(rt.wild, l)
	}
	if l.maxBody > 0 {
		rt.lowLimits = true
	}
	return nil
}

// exactKey is the request path an exact pattern matches, as its literal
// segments spell it: the pattern as written unless it had {$} or
// percent-encoding. A pattern whose decoded literals hold a '/' (from
// %2F) never takes the fast path: its key is not a path.
func exactKey(p *pattern) string {
	var b strings.Builder
	for _, s := range p.segs {
		b.WriteByte('/')
		if strings.IndexByte(s.s, '/') >= 0 {
			return "\x00" + p.path
		}
		b.WriteString(s.s)
	}
	return b.String()
}

// checkConflicts compares p with the patterns that could conflict with it.
// Two exact patterns conflict only when they are the same path and
// method, which the exact map finds at once; so registering many exact
// paths stays linear (100,000 of them must not mean 10^10 comparisons).
// An exact pattern can conflict with a wildcard pattern only when its
// method is the more general one.
func (rt *router) checkConflicts(p *pattern) error {
	check := func(o *leaf) error {
		if conflicts(p, o.pat) {
			what := "conflicts with"
			if combine(compareMethods(p.method, o.pat.method), comparePaths(p, o.pat)) == equivalent {
				what = "duplicates"
			}
			return fmt.Errorf("pattern %q %s pattern %q", p.String(), what, o.pat.String())
		}
		return nil
	}
	if p.exact {
		if r := rt.exact[exactKey(p)]; r != nil {
			for _, l := range r.leaves {
				if err := check(l); err != nil {
					return err
				}
			}
		}
	} else {
		for _, t := range rt.trees {
			m := compareMethods(t.method, p.method)
			if m != moreGeneral && m != equivalent {
				continue
			}
			for _, l := range t.exact {
				if err := check(l); err != nil {
					return err
				}
			}
		}
	}
	for _, l := range rt.wild {
		if err := check(l); err != nil {
			return err
		}
	}
	return nil
}

// matcher is the state of one match: the path, where the wildcards'
// values go, and the scratch space for percent-decoded segments.
type matcher struct {
	path    []byte
	escaped bool // path holds a '%'
	vals    *[maxWildcards][]byte
	n       int
	scratch *[]byte
}

// decode returns b percent-decoded (into the scratch space when it holds
// an escape). The parser let only well-formed escapes through.
func (m *matcher) decode(b []byte) []byte {
	if !m.escaped {
		return b
	}
	return unescapeInto(m.scratch, b, false)
}

// match finds the leaf for the path from position i (just after a '/';
// len(path)+1 when the path is used up), trying literal, then single
// wildcard, then multi wildcard children: by construction (conflicts are
// refused) the first leaf found is the most specific.
func (n *node) match(m *matcher, i int) *leaf {
	if i > len(m.path) {
		return n.leaf
	}
	j := i
	for j < len(m.path) && m.path[j] != '/' {
		j++
	}
	seg := m.path[i:j]
	if n.litKeys != nil || n.litMap != nil {
		if c := n.lit(m.decode(seg)); c != nil {
			if l := c.match(m, j+1); l != nil {
				return l
			}
		}
	}
	if n.wild != nil && len(seg) > 0 {
		m.vals[m.n] = m.decode(seg)
		m.n++
		if l := n.wild.match(m, j+1); l != nil {
			return l
		}
		m.n--
	}
	if n.multi != nil {
		m.vals[m.n] = m.decode(m.path[i:])
		m.n++
		return n.multi.leaf
	}
	return nil
}

// find returns the route for method and path, the most specific pattern
// of the first of these that has one: the method's own, GET's for HEAD,
// those for every method. The wildcards' values are left in vals.
func (rt *router) find(method, path []byte, vals *[maxWildcards][]byte, scratch *[]byte) *leaf {
	if len(path) == 0 || path[0] != '/' {
		return nil // "*": no pattern matches it
	}
	m := matcher{path: path, vals: vals, scratch: scratch, escaped: bytes.IndexByte(path, '%') >= 0}
	if l := rt.findIn(string(method), &m); l != nil {
		return l
	}
	if string(method) == "HEAD" {
		if l := rt.findIn("GET", &m); l != nil {
			return l
		}
	}
	if len(method) > 0 {
		return rt.findIn("", &m)
	}
	return nil
}

func (rt *router) findIn(method string, m *matcher) *leaf {
	t := rt.tree(method)
	if t == nil {
		return nil
	}
	m.n = 0
	return t.root.match(m, 1)
}

// appendAllow appends the Allow header value for a path no pattern of
// the request's method matches: every method whose patterns match it, in
// the order they were first registered, and HEAD after GET. It is "" when
// none does (404).
func (rt *router) appendAllow(dst []byte, path []byte, vals *[maxWildcards][]byte, scratch *[]byte) []byte {
	start := len(dst)
	get, head := false, false
	for _, t := range rt.trees {
		if t.method == "" {
			continue
		}
		m := matcher{path: path, vals: vals, scratch: scratch, escaped: bytes.IndexByte(path, '%') >= 0}
		if len(path) == 0 || path[0] != '/' || t.root.match(&m, 1) == nil {
			continue
		}
		if len(dst) > start {
			dst = append(dst, ", "...)
		}
		dst = append(dst, t.method...)
		get = get || t.method == "GET"
		head = head || t.method == "HEAD"
	}
	if get && !head {
		dst = append(dst, ", HEAD"...)
	}
	return dst
}

// equalShort reports whether string(b) == s. It compares a path (or a
// method) of 4 to 8 bytes inline, as two words that may overlap: a call
// to the runtime's memequal for "/json" cost 24 instructions
// (cachegrind). Small enough to be inlined itself.
func equalShort(b []byte, s string) bool {
	n := len(b)
	switch {
	case n != len(s):
		return false
	case n < 4 || n > 8:
		return string(b) == s
	}
	t := unsafe.Slice(unsafe.StringData(s), n) // read only
	return binary.LittleEndian.Uint32(b) == binary.LittleEndian.Uint32(t) &&
		binary.LittleEndian.Uint32(b[n-4:]) == binary.LittleEndian.Uint32(t[n-4:])
}
