package kernelconfig

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

// refusedText is the list of mitigation parameters a per-image command line
// may not carry; see the file for why each is there.
//
//go:embed fragments/cmdline-refused.txt
var refusedText string

// RefusedParams are the kernel parameter names (normalised: '-' as '_')
// that switch a speculative-execution mitigation on or change it in Linux
// 6.1. Only the policy's built-in command line may name them.
var RefusedParams = parseRefused(refusedText)

func parseRefused(text string) []string {
	var names []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names = append(names, paramName(line))
	}
	return names
}

// paramName is the name of a command-line word ("spectre-v2=on" ->
// "spectre_v2"), the way the kernel compares them (parameq treats '-' and
// '_' alike).
func paramName(word string) string {
	name, _, _ := strings.Cut(word, "=")
	return strings.ReplaceAll(name, "-", "_")
}

// IsRefusedParam reports whether a command-line word names a mitigation
// parameter, whatever its value.
func IsRefusedParam(word string) bool {
	return slices.Contains(RefusedParams, paramName(word))
}

// CmdlineError is an extra command-line word that would change the
// mitigations the policy turned off.
type CmdlineError struct {
	Cmdline string
	Words   []string
}

func (e *CmdlineError) Error() string {
	return fmt.Sprintf("kernel command line %q: %s would override the policy's mitigations=off "+
		"(Linux reads parameters after the built-in ones, the last mitigations= wins); "+
		"mitigation parameters are refused, see kernel-config/fragments/cmdline-refused.txt",
		e.Cmdline, strings.Join(e.Words, ", "))
}

// CmdlineWords splits a kernel command line into the words the policy
// checks. Linux strips double quotes (`"spectre_v2=on"` and
// `spectre_v2="on"` are both spectre_v2=on), so they are dropped before
// splitting: a quoted parameter cannot slip past the refusal. A quoted
// value with spaces then splits into more words than the kernel sees,
// which can only make the check stricter.
func CmdlineWords(cmdline string) []string {
	return strings.Fields(strings.ReplaceAll(cmdline, `"`, ""))
}

// CheckExtraCmdline refuses a per-image command line (what is appended to
// the policy's) that names any mitigation parameter.
func CheckExtraCmdline(extra string) error {
	var bad []string
	for _, w := range CmdlineWords(extra) {
		if IsRefusedParam(w) {
			bad = append(bad, w)
		}
	}
	if len(bad) > 0 {
		return &CmdlineError{Cmdline: extra, Words: bad}
	}
	return nil
}

// CheckCmdline checks a final built-in command line against the policy's:
// the policy's words come first, in order, and no word after them names a
// mitigation parameter.
func CheckCmdline(policy, final string) error {
	pw, fw := CmdlineWords(policy), CmdlineWords(final)
	if len(fw) < len(pw) || !slices.Equal(fw[:len(pw)], pw) {
		return fmt.Errorf("kernel command line %q does not start with the policy's %q", final, policy)
	}
	return CheckExtraCmdline(strings.Join(fw[len(pw):], " "))
}
