package kernelconfig

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Dep is one Kconfig condition on a symbol ("depends on", an enclosing
// "if", or a prompt's "if") that is false in the checked config.
type Dep struct {
	Kind  string   // "depends on", "inside if", "prompt if"
	Expr  string   // the expression as written
	Unmet []string // symbols in Expr that are off in the config, e.g. "PCI_MSI is not set"
	File  string   // Kconfig file (relative to the tree) and line
}

func (d Dep) String() string {
	s := fmt.Sprintf("%s %s (%s)", d.Kind, d.Expr, d.File)
	if len(d.Unmet) > 0 {
		s += ": " + strings.Join(d.Unmet, ", ")
	}
	return s
}

// Explain fills in, for each violation, the Kconfig conditions of its
// symbol that are false in cfg, by reading the Kconfig files of the source
// tree. This is a pragmatic reading of Kconfig (per-file "if" blocks,
// "depends on" and prompt conditions, "select" and "$(...)" macros not
// followed), good enough to point at the symbol to enable; the real verdict
// is always Kconfig's own, via olddefconfig and Check. Files under other
// architectures, Documentation, tools and scripts are skipped.
func Explain(srcTree, arch string, cfg *Config, vs []Violation) error {
	want := map[string]bool{}
	for _, v := range vs {
		want[v.Symbol] = true
	}
	if len(want) == 0 {
		return nil
	}
	defs, err := findDefinitions(srcTree, arch, want)
	if err != nil {
		return err
	}
	for i := range vs {
		v := &vs[i]
		ds := defs[v.Symbol]
		ok := false
		for _, d := range ds {
			ok = ok || d.Kind == "defined"
		}
		if !ok {
			if v.Kind != Forbidden {
				v.Undefined = true
			}
			continue
		}
		for _, d := range ds {
			switch {
			case d.Kind == "defined":
			case d.Kind == "selected by":
				// An option that is on although the fragment says off is
				// usually forced by another option's "select".
				if v.Kind == Forbidden && cfg.Enabled(d.Expr) {
					d.Unmet = []string{d.Expr + " is set"}
					v.Deps = append(v.Deps, d)
				}
			case v.Kind == Forbidden:
				// Without a visible prompt Kconfig ignores the "not set"
				// and applies the default.
				if d.Kind == "prompt if" && evalExpr(d.Expr, cfg) == 'n' {
					d.Unmet = unmetSymbols(d.Expr, cfg)
					v.Deps = append(v.Deps, d)
				}
			case evalExpr(d.Expr, cfg) == 'n':
				d.Unmet = unmetSymbols(d.Expr, cfg)
				v.Deps = append(v.Deps, d)
			}
		}
	}
	return nil
}

// findDefinitions scans Kconfig files for "config SYM"/"menuconfig SYM"
// blocks of the wanted symbols and returns their conditions.
func findDefinitions(srcTree, arch string, want map[string]bool) (map[string][]Dep, error) {
	srcArch := arch
	if arch == "x86_64" || arch == "i386" {
		srcArch = "x86"
	}
	out := map[string][]Dep{}
	err := filepath.WalkDir(srcTree, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(srcTree, path)
		if d.IsDir() {
			switch {
			case rel == "Documentation" || rel == "tools" || rel == "scripts" || rel == ".git":
				return filepath.SkipDir
			case filepath.Dir(rel) == "arch" && d.Name() != srcArch:
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(d.Name(), "Kconfig") {
			return nil
		}
		return scanKconfig(path, rel, want, out)
	})
	return out, err
}

func scanKconfig(path, rel string, want map[string]bool, out map[string][]Dep) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var ifs []string // enclosing "if" expressions in this file
	cur := ""        // symbol whose block we are in, if wanted
	block := ""      // symbol whose block we are in, any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		for strings.HasSuffix(line, "\\") && sc.Scan() { // continuation lines
			n++
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(sc.Text())
		}
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(stripComment(rest))
		where := fmt.Sprintf("%s:%d", rel, n)
		switch word {
		case "config", "menuconfig":
			cur, block = "", rest
			if want[rest] {
				cur = rest
				out[cur] = append(out[cur], Dep{Kind: "defined", File: where})
				for _, e := range ifs {
					out[cur] = append(out[cur], Dep{Kind: "inside if", Expr: e, File: where})
				}
			}
		case "if":
			ifs = append(ifs, rest)
			cur, block = "", ""
		case "endif":
			if len(ifs) > 0 {
				ifs = ifs[:len(ifs)-1]
			}
			cur, block = "", ""
		case "choice", "endchoice", "menu", "endmenu", "source", "comment", "mainmenu":
			cur, block = "", ""
		case "select", "imply":
			target, _, _ := strings.Cut(rest, " ")
			if want[target] && block != "" {
				out[target] = append(out[target], Dep{Kind: "selected by", Expr: block, File: where})
			}
		case "depends":
			if cur != "" && strings.HasPrefix(rest, "on ") {
				out[cur] = append(out[cur], Dep{Kind: "depends on", Expr: strings.TrimSpace(rest[3:]), File: where})
			}
		case "bool", "tristate", "string", "int", "hex", "prompt", "def_bool", "def_tristate":
			if cur == "" || word == "def_bool" || word == "def_tristate" {
				continue
			}
			// `bool "prompt" if EXPR`: the prompt (and so a user's value)
			// only exists when EXPR holds.
			if i := strings.LastIndex(rest, `" if `); i >= 0 {
				out[cur] = append(out[cur], Dep{Kind: "prompt if", Expr: strings.TrimSpace(rest[i+5:]), File: where})
			}
		}
	}
	return sc.Err()
}

func stripComment(s string) string {
	inQuote := false
	for i, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
		case r == '#' && !inQuote:
			return s[:i]
		}
	}
	return s
}

// Kconfig expressions, evaluated in tristate logic ('y', 'm', 'n') against
// a .config. Grammar: expr = and {"||" and}; and = unary {"&&" unary};
// unary = "!" unary | "(" expr ")" | term [("="|"!="|"<"|">"|"<="|">=") term].

type exprParser struct {
	toks []string
	pos  int
	cfg  *Config
}

func tokenize(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case strings.HasPrefix(s[i:], "&&") || strings.HasPrefix(s[i:], "||") ||
			strings.HasPrefix(s[i:], "!=") || strings.HasPrefix(s[i:], "<=") || strings.HasPrefix(s[i:], ">="):
			toks = append(toks, s[i:i+2])
			i += 2
		case strings.ContainsRune("!()=<>", rune(c)):
			toks = append(toks, s[i:i+1])
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			toks = append(toks, s[i:min(j+1, len(s))])
			i = j + 1
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(s); j++ {
				if s[j] == '(' {
					depth++
				} else if s[j] == ')' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			toks = append(toks, s[i:min(j+1, len(s))])
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t!()=<>&|\"", rune(s[j])) {
				j++
			}
			if j == i {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks
}

func evalExpr(expr string, cfg *Config) byte {
	p := &exprParser{toks: tokenize(expr), cfg: cfg}
	return p.or()
}

func (p *exprParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *exprParser) next() string { t := p.peek(); p.pos++; return t }

func tri(a byte) int { return map[byte]int{'n': 0, 'm': 1, 'y': 2}[a] }

func fromTri(i int) byte { return "nmy"[i] }

func (p *exprParser) or() byte {
	v := p.and()
	for p.peek() == "||" {
		p.next()
		v = fromTri(max(tri(v), tri(p.and())))
	}
	return v
}

func (p *exprParser) and() byte {
	v := p.unary()
	for p.peek() == "&&" {
		p.next()
		v = fromTri(min(tri(v), tri(p.unary())))
	}
	return v
}

func (p *exprParser) unary() byte {
	switch p.peek() {
	case "!":
		p.next()
		return fromTri(2 - tri(p.unary()))
	case "(":
		p.next()
		v := p.or()
		if p.peek() == ")" {
			p.next()
		}
		return v
	}
	a := p.next()
	switch op := p.peek(); op {
	case "=", "!=", "<", ">", "<=", ">=":
		p.next()
		b := p.next()
		va, vb := p.value(a), p.value(b)
		// Kconfig compares two int or hex values as numbers (0x40 = 64)
		// and anything else as text (scripts/kconfig/expr.c
		// expr_calc_value, sym_string_valid).
		x, e1 := parseNumber(va)
		y, e2 := parseNumber(vb)
		numeric := e1 == nil && e2 == nil
		var r bool
		switch op {
		case "=":
			r = va == vb || numeric && x == y
		case "!=":
			r = va != vb && !(numeric && x == y)
		default:
			if !numeric {
				return 'y' // cannot tell: do not blame this condition
			}
			r = map[string]bool{"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op]
		}
		if r {
			return 'y'
		}
		return 'n'
	}
	return p.symbol(a)
}

// value is a term's string value: a quoted literal, a symbol's value, or
// the constants y/m/n.
func (p *exprParser) value(t string) string {
	switch {
	case strings.HasPrefix(t, `"`):
		return Unquote(t)
	case t == "y" || t == "m" || t == "n":
		return t
	case strings.HasPrefix(t, "$("):
		return t
	case isNumber(t):
		return t
	}
	v, ok := p.cfg.Get(t)
	if !ok || v == NotSet {
		return "n"
	}
	return Unquote(v)
}

func (p *exprParser) symbol(t string) byte {
	switch {
	case t == "y" || t == "m" || t == "n":
		return t[0]
	case strings.HasPrefix(t, "$(") || t == "":
		return 'y' // a macro (compiler test): assume it holds
	}
	v, ok := p.cfg.Get(t)
	switch {
	case !ok || v == NotSet:
		return 'n'
	case v == "m":
		return 'm'
	}
	return 'y'
}

// unmetSymbols lists the symbols of expr that are off (or, behind a "!",
// on) in cfg, as short explanations.
func unmetSymbols(expr string, cfg *Config) []string {
	toks := tokenize(expr)
	var out []string
	seen := map[string]bool{}
	for i, t := range toks {
		if t == "" || strings.ContainsAny(t[:1], `!()=<>&|"$`) || t == "y" || t == "m" || t == "n" {
			continue
		}
		if i+1 < len(toks) && isCmp(toks[i+1]) || i > 0 && isCmp(toks[i-1]) {
			continue // part of a comparison; the expression itself is shown
		}
		negated := i > 0 && toks[i-1] == "!"
		on := cfg.Enabled(t)
		switch {
		case !negated && !on && !seen[t]:
			out = append(out, t+" is not set")
		case negated && on && !seen[t]:
			out = append(out, t+" is set")
		default:
			continue
		}
		seen[t] = true
	}
	return out
}

func isCmp(t string) bool {
	switch t {
	case "=", "!=", "<", ">", "<=", ">=":
		return true
	}
	return false
}

// isNumber reports whether t is an int or hex constant: decimal digits, or
// 0x and hex digits (0xff as much as 0x1f), optionally negative.
func isNumber(t string) bool {
	t = strings.TrimPrefix(t, "-")
	if h, ok := strings.CutPrefix(t, "0x"); ok {
		return h != "" && strings.Trim(h, "0123456789abcdefABCDEF") == ""
	}
	return t != "" && strings.Trim(t, "0123456789") == ""
}

// parseNumber reads an int or hex value as Kconfig writes them.
func parseNumber(s string) (int64, error) {
	if !isNumber(s) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	base := 10 // a leading 0 is not octal in Kconfig
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		s, base = h, 16
	}
	v, err := strconv.ParseInt(s, base, 64)
	if neg {
		v = -v
	}
	return v, err
}
