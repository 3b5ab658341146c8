package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// routerOf registers patterns ("METHOD /path" or "/path") on a router
// the way Handle does.
func routerOf(t testing.TB, patterns ...string) *router {
	t.Helper()
	rt := &router{}
	for _, ps := range patterns {
		method, path := splitPattern(ps)
		p, err := parsePattern(method, path)
		if err != nil {
			t.Fatalf("%q: %v", ps, err)
		}
		if err := rt.add(&leaf{pat: p, h: func(*Ctx) {}}); err != nil {
			t.Fatalf("%q: %v", ps, err)
		}
	}
	return rt
}

func splitPattern(ps string) (method, path string) {
	if m, p, ok := strings.Cut(ps, " "); ok {
		return m, p
	}
	return "", ps
}

func TestRouteMatch(t *testing.T) {
	rt := routerOf(t,
		"GET /json",
		"GET /v1/items/{id}",
		"GET /v1/items/all",
		"POST /v1/items/{id}",
		"GET /v1/items/{id}/tags/{tag}",
		"GET /files/{path...}",
		"GET /files/README",
		"/any/{x}",
		"GET /any/{x}",
		"HEAD /head",
		"GET /head",
		"GET /slash/",
		"GET /dollar/{$}",
		"GET /",
		"GET /esc/a%2Fb",
	)
	tests := []struct {
		method, path string
		want         string   // the pattern; "" none
		vals         []string // name=value
		allow        string   // when want is ""
	}{
		{"GET", "/json", "GET /json", nil, ""},
		{"HEAD", "/json", "GET /json", nil, ""},
		{"POST", "/json", "", nil, "GET, HEAD"},
		{"GET", "/v1/items/42", "GET /v1/items/{id}", []string{"id=42"}, ""},
		{"GET", "/v1/items/all", "GET /v1/items/all", []string{"id="}, ""},
		{"POST", "/v1/items/all", "POST /v1/items/{id}", []string{"id=all"}, ""},
		{"PUT", "/v1/items/all", "", nil, "GET, POST, HEAD"},
		{"GET", "/v1/items/", "", nil, ""}, // {id} matches no empty segment
		{"GET", "/v1/items", "", nil, ""},
		{"GET", "/v1/items/42/tags/red", "GET /v1/items/{id}/tags/{tag}", []string{"id=42", "tag=red"}, ""},
		{"GET", "/v1/items/%34%32", "GET /v1/items/{id}", []string{"id=42"}, ""},
		{"GET", "/v1/items/a%2Fb", "GET /v1/items/{id}", []string{"id=a/b"}, ""},
		{"GET", "/v1/items/a+b", "GET /v1/items/{id}", []string{"id=a+b"}, ""},
		{"GET", "/files/a/b/c", "GET /files/{path...}", []string{"path=a/b/c"}, ""},
		{"GET", "/files/", "GET /files/{path...}", []string{"path="}, ""},
		{"GET", "/files", "", nil, ""},
		{"GET", "/files/README", "GET /files/README", nil, ""},
		{"GET", "/files/README/x", "GET /files/{path...}", []string{"path=README/x"}, ""},
		{"GET", "/files/a%20b/c", "GET /files/{path...}", []string{"path=a b/c"}, ""},
		{"GET", "/any/1", "GET /any/{x}", []string{"x=1"}, ""},
		{"DELETE", "/any/1", "/any/{x}", []string{"x=1"}, ""},
		{"HEAD", "/any/1", "GET /any/{x}", []string{"x=1"}, ""},
		{"HEAD", "/head", "HEAD /head", nil, ""},
		{"GET", "/head", "GET /head", nil, ""},
		{"POST", "/head", "", nil, "GET, HEAD"}, // methods in the order first registered
		{"GET", "/slash/", "GET /slash/", nil, ""},
		{"GET", "/slash/x", "", nil, ""}, // not a subtree, unlike ServeMux
		{"GET", "/slash", "", nil, ""},
		{"GET", "/dollar/", "GET /dollar/{$}", nil, ""},
		{"GET", "/", "GET /", nil, ""},
		{"GET", "/missing", "", nil, ""},
		{"GET", "*", "", nil, ""},
		{"GET", "/esc/a%2Fb", "GET /esc/a%2Fb", nil, ""},
		{"GET", "/esc/a/b", "", nil, ""},
	}
	for _, tt := range tests {
		var vals [maxWildcards][]byte
		var scratch []byte
		l := rt.find([]byte(tt.method), []byte(tt.path), &vals, &scratch)
		got := ""
		if l != nil {
			got = l.pat.label
		}
		if got != tt.want {
			t.Errorf("%s %s: pattern %q, want %q", tt.method, tt.path, got, tt.want)
			continue
		}
		if l == nil {
			if allow := string(rt.appendAllow(nil, []byte(tt.path), &vals, &scratch)); allow != tt.allow {
				t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, allow, tt.allow)
			}
			continue
		}
		c := Ctx{leaf: l, vals: vals}
		for _, nv := range tt.vals {
			n, v, _ := strings.Cut(nv, "=")
			if l.pat.exact {
				v = "" // the fast path sets no values; a literal has none
			}
			if got := string(c.PathValue(n)); got != v {
				t.Errorf("%s %s: PathValue(%q) = %q, want %q", tt.method, tt.path, n, got, v)
			}
		}
		if c.PathValue("nosuch") != nil {
			t.Errorf("%s %s: PathValue of an unknown name is not nil", tt.method, tt.path)
		}
	}
}

// TestHandleConflicts: the second of two patterns that match the same
// requests, or overlap with neither more specific, panics naming both;
// patterns ordered by specificity do not.
func TestHandleConflicts(t *testing.T) {
	tests := []struct {
		first, second string
		panics        string // a substring of the panic; "" none
	}{
		{"GET /a", "GET /a", `pattern "GET /a" duplicates pattern "GET /a"`},
		{"GET /a/{x}", "GET /a/{y}", `pattern "GET /a/{y}" duplicates pattern "GET /a/{x}"`},
		{"GET /a/{x}/c", "GET /a/b/{y}", `pattern "GET /a/b/{y}" conflicts with pattern "GET /a/{x}/c"`},
		{"GET /a/{x}", "/a/b", `pattern "/a/b" conflicts with pattern "GET /a/{x}"`},
		{"/a/b", "GET /a/{x}", `pattern "GET /a/{x}" conflicts with pattern "/a/b"`},
		{"HEAD /a/{x}", "GET /a/b", `pattern "GET /a/b" conflicts with pattern "HEAD /a/{x}"`},
		{"GET /a/{x...}", "GET /{y}/b", `conflicts with`},
		{"/a/{x...}", "/a/{y...}", `duplicates`},
		{"GET /a/{$}", "GET /a/", `duplicates`},
		{"GET /a/{x}", "GET /a/b", ""},
		{"GET /a/{x}", "POST /a/{x}", ""},
		{"GET /a/{x}", "/a/{x}", ""},
		{"GET /a/{x...}", "GET /a/{x}", ""},
		{"GET /a/{x...}", "GET /a/", ""},
		{"GET /a/{x}", "GET /a/", ""},
		{"GET /a", "GET /a/{x...}", ""},
		{"GET /a/b", "/a/b", ""},
		{"GET /{x}/{y}", "GET /a/b/{z...}", ""},
	}
	for _, tt := range tests {
		got := func() (msg string) {
			defer func() {
				if p := recover(); p != nil {
					msg = fmt.Sprint(p)
				}
			}()
			s := New(Config{})
			for _, ps := range []string{tt.first, tt.second} {
				m, p := splitPattern(ps)
				s.Handle(m, p, func(*Ctx) {})
			}
			return ""
		}()
		if tt.panics == "" && got != "" || tt.panics != "" && !strings.Contains(got, tt.panics) {
			t.Errorf("%q then %q: panic %q, want %q", tt.first, tt.second, got, tt.panics)
		}
	}
}

func TestBadPatterns(t *testing.T) {
	for _, ps := range []string{"", "a", "/a/{", "/a/{}", "/a/{x}y", "/a/x{y}", "/{x...}/b", "/{$}/b",
		"/{x}/{x}", "/{1x}", "/a//b", "/%zz", "/{x-y}", "GE T /a"} {
		m, p := splitPattern(ps)
		if m == "GE" {
			m, p = "GE T", "/a"
		}
		if _, err := parsePattern(m, p); err == nil {
			t.Errorf("parsePattern(%q, %q): no error", m, p)
		}
	}
	var b strings.Builder
	for i := range maxWildcards + 1 {
		fmt.Fprintf(&b, "/{w%d}", i)
	}
	if _, err := parsePattern("", b.String()); err == nil {
		t.Errorf("%d wildcards: no error", maxWildcards+1)
	}
}

// FuzzRouteVsServeMux is the differential check of the router against
// net/http's ServeMux, the oracle: for a random set of patterns, both
// accept or refuse each registration (a conflict), and for random paths
// both choose the same pattern with the same wildcard values, or agree
// that none matches (with the same Allow methods when others do). Our
// patterns ending in "/" are ServeMux's ending in "/{$}" (no subtrees),
// and paths are clean (ServeMux would redirect others).
func FuzzRouteVsServeMux(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		diffRoutes(t, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	})
}

// TestRouteVsServeMux runs the differential check over many seeds in
// every test run (the fuzzer explores further).
func TestRouteVsServeMux(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	for seed := range uint64(n) {
		diffRoutes(t, rand.New(rand.NewPCG(seed, 7)))
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

var (
	diffLits    = []string{"a", "b", "c"}
	diffMethods = []string{"", "GET", "HEAD", "POST"}
)

func randPattern(r *rand.Rand) (method, ours, theirs string) {
	method = diffMethods[r.IntN(len(diffMethods))]
	n := 1 + r.IntN(3)
	var b strings.Builder
	for i := range n {
		b.WriteByte('/')
		last := i == n-1
		switch k := r.IntN(10); {
		case k < 5:
			b.WriteString(diffLits[r.IntN(len(diffLits))])
		case k < 8:
			fmt.Fprintf(&b, "{w%d}", i)
		case last && k == 8:
			fmt.Fprintf(&b, "{m%d...}", i)
		case last:
			// trailing slash: "/x/" here, "/x/{$}" in ServeMux
		default:
			b.WriteString("a")
		}
	}
	ours = b.String()
	theirs = ours
	if strings.HasSuffix(ours, "/") {
		theirs += "{$}"
	}
	if method != "" {
		theirs = method + " " + theirs
	}
	return method, ours, theirs
}

func randPath(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	var b strings.Builder
	for i := range n {
		b.WriteByte('/')
		switch k := r.IntN(12); {
		case k < 7:
			b.WriteString(diffLits[r.IntN(len(diffLits))])
		case k < 8:
			b.WriteString("%61") // "a", escaped
		case k < 9:
			b.WriteString("a%2Fb")
		case k < 10:
			b.WriteString("zz")
		case i == n-1:
			// trailing slash
		default:
			b.WriteString("b")
		}
	}
	return b.String()
}

func diffRoutes(t *testing.T, r *rand.Rand) {
	t.Helper()
	mux := http.NewServeMux()
	rt := &router{}
	var got struct {
		pattern string
		vals    map[string]string
	}
	names := map[string][]string{} // ServeMux pattern -> wildcard names
	label := map[string]string{}   // ServeMux pattern -> ours
	for range 1 + r.IntN(8) {
		method, ours, theirs := randPattern(r)
		p, err := parsePattern(method, ours)
		if err != nil {
			t.Fatalf("%q: %v", ours, err)
		}
		theirErr := func() (err any) {
			defer func() { err = recover() }()
			pat := theirs
			mux.HandleFunc(pat, func(w http.ResponseWriter, req *http.Request) {
				got.pattern = pat
				got.vals = map[string]string{}
				for _, n := range names[pat] {
					got.vals[n] = req.PathValue(n)
				}
			})
			return nil
		}()
		ourErr := rt.add(&leaf{pat: p, h: func(*Ctx) {}})
		if (ourErr == nil) != (theirErr == nil) {
			t.Fatalf("registering %q (ServeMux %q): ours %v, ServeMux %v", p.label, theirs, ourErr, theirErr)
		}
		if ourErr == nil {
			names[theirs] = p.names
			label[theirs] = p.label
		}
	}
	for range 30 {
		method := diffMethods[1+r.IntN(len(diffMethods)-1)]
		if r.IntN(4) == 0 {
			method = "PUT"
		}
		path := randPath(r)
		req := httptest.NewRequest(method, path, nil)
		rec := httptest.NewRecorder()
		got.pattern = ""
		mux.ServeHTTP(rec, req)
		var vals [maxWildcards][]byte
		var scratch []byte
		l := rt.find([]byte(method), []byte(path), &vals, &scratch)
		switch {
		case rec.Code == http.StatusMovedPermanently || rec.Code == http.StatusTemporaryRedirect:
			// ServeMux redirects path to path+"/" when path+"/" has an
			// exact match and path none, or only one of a {x...}
			// (ServeMux prefers the redirect then); we never redirect.
			if l != nil && !l.pat.segs[len(l.pat.segs)-1].multi {
				t.Errorf("%s %s: ours %q, ServeMux redirects", method, path, l.pat.label)
			}
		case got.pattern == "":
			if l != nil {
				t.Errorf("%s %s: ours %q, ServeMux none (%d)", method, path, l.pat.label, rec.Code)
				continue
			}
			ours := rt.appendAllow(nil, []byte(path), &vals, &scratch)
			if !strings.HasSuffix(path, "/") {
				// ServeMux also counts the methods of path+"/".
				more := rt.appendAllow(nil, []byte(path+"/"), &vals, &scratch)
				if len(ours) > 0 && len(more) > 0 {
					ours = append(ours, ", "...)
				}
				ours = append(ours, more...)
			}
			o := strings.Split(string(ours), ", ")
			slices.Sort(o)
			o = slices.Compact(o)
			theirs := rec.Header().Get("Allow")
			if rec.Code != http.StatusMethodNotAllowed {
				theirs = ""
			}
			if strings.Join(o, ", ") != theirs {
				t.Errorf("%s %s: Allow %q, ServeMux %q (%d)", method, path, strings.Join(o, ", "), theirs, rec.Code)
			}
		case l == nil:
			t.Errorf("%s %s: ours none, ServeMux %q", method, path, got.pattern)
		case l.pat.label != label[got.pattern]:
			t.Errorf("%s %s: ours %q, ServeMux %q", method, path, l.pat.label, got.pattern)
		default:
			c := Ctx{leaf: l, vals: vals}
			for n, v := range got.vals {
				if string(c.PathValue(n)) != v {
					t.Errorf("%s %s (%s): PathValue(%q) = %q, ServeMux %q", method, path, l.pat.label, n, c.PathValue(n), v)
				}
			}
		}
	}
}

// TestRouteManyLiterals: past maxLitSlice literal children a node keeps
// them in a map; both forms find every literal and fall back to the
// wildcard for the rest.
func TestRouteManyLiterals(t *testing.T) {
	for _, n := range []int{maxLitSlice, maxLitSlice + 1, 100} {
		patterns := []string{"GET /k/{x}"}
		for i := range n {
			patterns = append(patterns, fmt.Sprintf("GET /k/l%d/{y}", i))
		}
		rt := routerOf(t, patterns...)
		var vals [maxWildcards][]byte
		var scratch []byte
		for i := range n {
			l := rt.find([]byte("GET"), []byte(fmt.Sprintf("/k/l%d/v", i)), &vals, &scratch)
			if l == nil || l.pat.path != fmt.Sprintf("/k/l%d/{y}", i) {
				t.Fatalf("%d literals: /k/l%d/v found %v", n, i, l)
			}
		}
		if l := rt.find([]byte("GET"), []byte("/k/other"), &vals, &scratch); l == nil || l.pat.path != "/k/{x}" {
			t.Errorf("%d literals: /k/other found %v", n, l)
		}
	}
}

// TestExactRouteGet: an exact path's get is what lookup finds for GET
// (serve takes it without comparing the method), whatever the order and
// the other methods of its patterns; and over the request path, the
// previous request's route (serve's fast path) still tells GET from the
// other methods.
func TestExactRouteGet(t *testing.T) {
	rt := routerOf(t, "POST /a", "GET /a", "HEAD /a", "/b", "GET /b", "GET /c", "PUT /d", "HEAD /e", "GET /e")
	// Every one of the five paths takes the fast path, keyed by itself.
	if got, want := slices.Sorted(maps.Keys(rt.exact)), []string{"/a", "/b", "/c", "/d", "/e"}; !slices.Equal(got, want) {
		t.Errorf("exact paths %q, want %q", got, want)
	}
	for path, r := range rt.exact {
		if want := r.lookup([]byte("GET")); r.get != want {
			t.Errorf("%s: get %p, lookup(GET) %p", path, r.get, want)
		}
		if path != "/d" && r.get == nil {
			t.Errorf("%s: no get", path)
		}
	}
	w, c := newAPIWorker(t, nil, nil)
	for i, tt := range []struct{ req, status string }{
		{"GET /json", "200"},
		{"POST /json", "405"},
		{"GET /json", "200"},
		{"GEX /json", "405"},
		{"PUT /json", "405"},
		{"GET /json", "200"},
	} {
		out := serveOne(w, c, tt.req+" HTTP/1.1\r\nHost: a\r\n\r\n")
		if !strings.HasPrefix(out, "HTTP/1.1 "+tt.status+" ") {
			t.Errorf("%d: %s: %.40q, want %s", i, tt.req, out, tt.status)
		}
	}
}
