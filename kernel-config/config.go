package kernelconfig

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// NotSet is the value a Config holds for a `# CONFIG_X is not set` line.
// Kconfig writes that line for a visible symbol that is off; a symbol that is
// not visible at all is simply absent. For the policy both mean "off".
const NotSet = "n"

var (
	setLine    = regexp.MustCompile(`^CONFIG_([A-Za-z0-9_]+)=(.*)$`)
	notSetLine = regexp.MustCompile(`^# CONFIG_([A-Za-z0-9_]+) is not set$`)
)

// Config is a parsed Kconfig .config (or fragment): symbol name without the
// CONFIG_ prefix -> raw value as written ("y", "m", "256", `"reno"`), or
// NotSet. Order of first appearance is kept so that writing a merged config
// back is stable and diffable.
type Config struct {
	order  []string
	values map[string]string
}

// NewConfig returns an empty Config.
func NewConfig() *Config { return &Config{values: map[string]string{}} }

// ParseConfig reads .config syntax. Comment lines other than "is not set"
// and blank lines are ignored; any other line is an error naming its number,
// so that a typo in a fragment cannot silently drop an option.
func ParseConfig(r io.Reader) (*Config, error) {
	c := NewConfig()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if m := setLine.FindStringSubmatch(line); m != nil {
			c.Set(m[1], m[2])
			continue
		}
		if m := notSetLine.FindStringSubmatch(line); m != nil {
			c.Set(m[1], NotSet)
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		return nil, fmt.Errorf("line %d: not a Kconfig line: %q", n, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Set records a value (NotSet for off); a later Set of the same symbol wins,
// as in Kconfig's own fragment merging.
func (c *Config) Set(sym, val string) {
	if _, ok := c.values[sym]; !ok {
		c.order = append(c.order, sym)
	}
	c.values[sym] = val
}

// Get returns the raw value and whether the symbol appears at all.
func (c *Config) Get(sym string) (string, bool) {
	v, ok := c.values[sym]
	return v, ok
}

// Enabled reports whether the symbol is on (any value other than not set).
func (c *Config) Enabled(sym string) bool {
	v, ok := c.values[sym]
	return ok && v != NotSet && v != ""
}

// Symbols returns the symbols in order of first appearance.
func (c *Config) Symbols() []string { return append([]string(nil), c.order...) }

// Len is the number of symbols.
func (c *Config) Len() int { return len(c.order) }

// Merge applies every entry of o on top of c, in o's order.
func (c *Config) Merge(o *Config) {
	for _, s := range o.order {
		c.Set(s, o.values[s])
	}
}

// WriteTo writes .config syntax.
func (c *Config) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	for _, s := range c.order {
		b.WriteString(Line(s, c.values[s]))
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// String is the .config text.
func (c *Config) String() string {
	var b strings.Builder
	c.WriteTo(&b)
	return b.String()
}

// Line formats one symbol the way Kconfig writes it.
func Line(sym, val string) string {
	if val == NotSet {
		return "# CONFIG_" + sym + " is not set"
	}
	return "CONFIG_" + sym + "=" + val
}

// Quote returns a Kconfig string value (with quotes and escapes).
func Quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// Unquote undoes Quote; a value without quotes is returned as is.
func Unquote(v string) string {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	v = v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// sortedKeys is a small helper for deterministic output.
func sortedKeys(m map[string]string) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
