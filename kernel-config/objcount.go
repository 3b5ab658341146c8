package kernelconfig

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// countConfigured counts the objects Kbuild builds into vmlinux for
// the configuration cfg (a complete .config) in
// the source tree at tree, for the architecture srcarch (x86, arm64): it
// reads the Kbuild files from the top Kbuild and the architecture's
// core-y, libs-y and drivers-y down, as Kbuild descends, and counts each
// object of obj-y and lib-y, and the parts of composite objects.
//
// Why our own reading and not make: `make -n` on a tree never built
// runs Kconfig's and the host tools' builds first, minutes under load;
// this is a read of the Makefiles, a fraction of a second. It is not
// Kbuild: it knows CONFIG_ values, plain variables, subst and the
// if/else conditionals, and drops what it cannot expand (other
// functions), and it does not see the objects outside the descent
// (scripts, the boot stub, vmlinux's own). So its count is not the
// build's; the difference between two configurations' counts is what
// the estimate uses (configuredEstimate), the parts it misses being
// mostly the same in both.
func countConfigured(tree, srcarch string, cfg *Config) int {
	k := kbuild{tree: tree, cfg: cfg, vars: map[string]string{"SRCARCH": srcarch, "BITS": "64"}, seen: map[string]bool{}}
	arch := k.read(filepath.Join("arch", srcarch, "Makefile"))
	k.vars["ARCH_CORE"] = arch.vars["core-y"]
	k.vars["ARCH_LIB"] = "lib/ " + arch.vars["libs-y"]
	k.vars["ARCH_DRIVERS"] = arch.vars["drivers-y"]
	return k.dir("")
}

// kbuild is one count's state: the tree, the configuration, the
// variables every Makefile sees, and the directories counted.
type kbuild struct {
	tree string
	cfg  *Config
	vars map[string]string
	seen map[string]bool
}

// makefile is what one Makefile assigns: its variables (obj-y, lib-y and
// composite parts among them), in order of assignment.
type makefile struct {
	vars map[string]string
}

// dir counts directory d's objects and those of its subdirectories.
func (k *kbuild) dir(d string) int {
	if k.seen[d] {
		return 0
	}
	k.seen[d] = true
	name := filepath.Join(d, "Kbuild")
	if _, err := os.Stat(filepath.Join(k.tree, name)); err != nil {
		name = filepath.Join(d, "Makefile")
	}
	m := k.read(name)
	n := 0
	counted := map[string]bool{}
	for _, e := range strings.Fields(m.vars["obj-y"] + " " + m.vars["lib-y"]) {
		if counted[e] {
			continue
		}
		counted[e] = true
		switch {
		case strings.HasSuffix(e, "/"):
			n += k.dir(filepath.Join(d, e))
		case strings.HasSuffix(e, ".o"):
			n++
			base := strings.TrimSuffix(e, ".o")
			parts := strings.Fields(m.vars[base+"-y"] + " " + m.vars[base+"-objs"])
			if len(parts) > 0 && !(len(parts) == 1 && parts[0] == e) {
				n += len(uniq(parts))
			}
		}
	}
	return n
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// read evaluates the Makefile at name (relative to the tree): its
// assignments under its conditionals. A missing file assigns nothing.
func (k *kbuild) read(name string) makefile {
	m := makefile{vars: map[string]string{}}
	f, err := os.Open(filepath.Join(k.tree, name))
	if err != nil {
		return m
	}
	defer f.Close()
	// active[i]: whether the i-th enclosing conditional's branch is
	// taken; taken[i]: whether any branch of it was.
	var active, taken []bool
	on := func() bool {
		for _, a := range active {
			if !a {
				return false
			}
		}
		return true
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var line string
	for sc.Scan() {
		l := sc.Text()
		if strings.HasSuffix(l, "\\") {
			line += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		line += l
		l, line = line, ""
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if strings.HasPrefix(l, "\t") {
			continue // a recipe
		}
		l = strings.TrimSpace(l)
		word, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "ifdef", "ifndef", "ifeq", "ifneq":
			c := k.cond(m, word, rest)
			active, taken = append(active, c), append(taken, c)
			continue
		case "else":
			if n := len(active); n > 0 {
				if rest != "" {
					w, r, _ := strings.Cut(rest, " ")
					c := !taken[n-1] && k.cond(m, w, strings.TrimSpace(r))
					active[n-1], taken[n-1] = c, taken[n-1] || c
				} else {
					active[n-1] = !taken[n-1]
					taken[n-1] = true
				}
			}
			continue
		case "endif":
			if n := len(active); n > 0 {
				active, taken = active[:n-1], taken[:n-1]
			}
			continue
		}
		if !on() {
			continue
		}
		k.assign(m, l)
	}
	return m
}

// assign records an assignment line (=, :=, ::=, ?=, +=) of m; other
// lines (rules, includes) are left alone.
func (k *kbuild) assign(m makefile, l string) {
	i := strings.Index(l, "=")
	if i <= 0 || strings.Contains(l[:i], ":") && !strings.HasSuffix(l[:i], ":") && !strings.HasSuffix(l[:i], "::") {
		return // a rule (target: prerequisites), or no assignment
	}
	lhs, op := l[:i], "="
	for _, o := range []string{"::", ":", "+", "?"} {
		if strings.HasSuffix(lhs, o) {
			lhs, op = strings.TrimSuffix(lhs, o), o+"="
			break
		}
	}
	lhs = strings.TrimSpace(k.expand(m, strings.TrimSpace(lhs)))
	if lhs == "" || strings.ContainsAny(lhs, " \t") {
		return
	}
	val := strings.Join(strings.Fields(k.expand(m, l[i+1:])), " ")
	switch op {
	case "+=":
		m.vars[lhs] = strings.TrimSpace(m.vars[lhs] + " " + val)
	case "?=":
		if _, ok := m.vars[lhs]; !ok {
			m.vars[lhs] = val
		}
	default:
		m.vars[lhs] = val
	}
}

// cond evaluates a conditional's test.
func (k *kbuild) cond(m makefile, word, arg string) bool {
	switch word {
	case "ifdef", "ifndef":
		v := strings.TrimSpace(k.expand(m, "$("+strings.TrimSpace(arg)+")"))
		return (v != "") == (word == "ifdef")
	case "ifeq", "ifneq":
		a, b, ok := condArgs(arg)
		if !ok {
			return word == "ifeq" // unknown form: the first branch
		}
		eq := strings.TrimSpace(k.expand(m, a)) == strings.TrimSpace(k.expand(m, b))
		return eq == (word == "ifeq")
	}
	return false
}

// condArgs splits "(a,b)", "'a' 'b'" or `"a" "b"`.
func condArgs(s string) (a, b string, ok bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		in := s[1 : len(s)-1]
		depth := 0
		for i, c := range in {
			switch c {
			case '(':
				depth++
			case ')':
				depth--
			case ',':
				if depth == 0 {
					return in[:i], in[i+1:], true
				}
			}
		}
		return "", "", false
	}
	f := strings.Fields(s)
	if len(f) == 2 {
		return strings.Trim(f[0], `"'`), strings.Trim(f[1], `"'`), true
	}
	return "", "", false
}

// expand replaces $(NAME) and ${NAME} references: CONFIG_ symbols by
// their .config value (y, a string, or nothing when not set), variables
// of m and of every Makefile by their value, subst and patsubst-free
// forms by their result; any other function expands to nothing.
func (k *kbuild) expand(m makefile, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		open := s[i+1]
		if open != '(' && open != '{' {
			i++ // $x, $$: dropped
			continue
		}
		closer := byte(')')
		if open == '{' {
			closer = '}'
		}
		depth, j := 0, i+1
		for ; j < len(s); j++ {
			if s[j] == open {
				depth++
			} else if s[j] == closer {
				if depth--; depth == 0 {
					break
				}
			}
		}
		if j >= len(s) {
			break
		}
		b.WriteString(k.ref(m, s[i+2:j]))
		i = j
	}
	return b.String()
}

// ref is the value of one reference's inside: a name, or a function.
func (k *kbuild) ref(m makefile, in string) string {
	if fn, args, ok := strings.Cut(in, " "); ok {
		if fn == "subst" {
			p := strings.SplitN(args, ",", 3)
			if len(p) == 3 {
				return strings.ReplaceAll(k.expand(m, p[2]), k.expand(m, p[0]), k.expand(m, p[1]))
			}
		}
		return ""
	}
	name := k.expand(m, in)
	if sym, ok := strings.CutPrefix(name, "CONFIG_"); ok {
		if v, _ := k.cfg.Get(sym); v != NotSet {
			return strings.Trim(v, `"`)
		}
		return ""
	}
	if v, ok := m.vars[name]; ok {
		return v
	}
	return k.vars[name]
}
