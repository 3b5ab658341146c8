package console

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escaping. Values from outside the machine (IMDS answers, user-data
// lines, DHCP options, NTP kiss codes, HTTP clients) end up in log lines
// and in the report; on a serial console a CR, an ESC sequence or a
// bidirectional override would let them rewrite what an operator sees,
// and a line break or CR followed by "HOTPATH-REPORT " would hand a line
// reader (EC2 get-console-output, the tests) a forged report. So every
// byte the Console writes for the init goes through these functions:
// what is not printable text is escaped, and the line prefixes of the
// machine-readable lines cannot appear anywhere but at the start of a
// line the Console itself writes.

// escapeRune says whether r must not reach the console as it is: C0 and
// C1 controls, DEL, and the Unicode characters that move or reorder text
// (line and paragraph separators, bidirectional marks, embeddings,
// overrides and isolates).
func escapeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// marker is what the machine-readable prefixes (report.ReportPrefix,
// report.EventPrefix) start with; its '-' is escaped wherever a value
// contains it.
const marker = "HOTPATH-"

// afterMarker says whether the '-' at s[i] ends "HOTPATH-".
func afterMarker(s string, i int) bool {
	return i >= len(marker)-1 && s[i-len(marker)+1:i+1] == marker
}

// appendText appends s to dst for a log line: printable text as it is,
// everything escapeRune refuses (and invalid UTF-8) as a Go-style escape
// (\r, \t, \x1b, \u202e), "HOTPATH-" as "HOTPATH\x2d".
func appendText(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = fmt.Appendf(dst, `\x%02x`, s[i])
		case r == '\t':
			dst = append(dst, `\t`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\n':
			dst = append(dst, `\n`...)
		case r < 0x80 && escapeRune(r):
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case escapeRune(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		case r == '-' && afterMarker(s, i):
			dst = append(dst, `\x2d`...)
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// everything escapeRune refuses as JSON escapes, the '-' of "HOTPATH-" as
// \u002d (the same string to a JSON reader, no prefix to a line reader).
// Invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, `\ufffd`...)
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, `\n`...)
		case r == '\r':
			dst = append(dst, `\r`...)
		case r == '\t':
			dst = append(dst, `\t`...)
		case escapeRune(r):
			dst = fmt.Appendf(dst, `\u%04x`, r)
		case r == '-' && afterMarker(s, i):
			dst = append(dst, `\u002d`...)
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// cut returns s cut to at most max bytes on a rune boundary, with a note
// of how much was cut, or s itself.
func cut(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "...(" + strconv.Itoa(len(s)-end) + " more bytes)", true
}

// logLines turns a formatted log message into the console lines that
// carry it (without Prefix and newline): one per line of the message,
// escaped, each at most MaxLine bytes, all together (with their prefixes)
// at most MaxLog bytes;
// what is left out is counted on the last line.
func logLines(msg string) []string {
	msg = strings.TrimRight(msg, "\n")
	var out []string
	total := 0
	rest := msg
	for rest != "" || out == nil {
		l, r, _ := strings.Cut(rest, "\n")
		rest = r
		b := appendText(nil, l)
		if len(b) > MaxLine {
			end := MaxLine
			for end > 0 && !utf8.RuneStart(b[end]) {
				end--
			}
			b = fmt.Appendf(b[:end:end], "...(%d more bytes)", len(b)-end)
		}
		// Each line costs its prefix and newline too.
		if total += len(Prefix) + len(b) + 1; total > MaxLog {
			out = append(out, fmt.Sprintf("...(%d more bytes of this message not printed)", len(l)+1+len(rest)))
			break
		}
		out = append(out, string(b))
	}
	return out
}

// escapeStream escapes the workload's output p for the console as
// appendText does for the init's lines, except that newline and tab stay
// (the workload's lines stay lines): C0 controls, DEL, C1 controls, the
// characters that move or reorder text, bytes that are not UTF-8
// (\x9b alone is CSI to an 8-bit terminal), and the '-' of "HOTPATH-"
// are escaped, also when a write ends in the middle of a character or of
// "HOTPATH" (c.carry and c.match hold what the next write completes).
// Its colours (ESC sequences) show as text. The caller holds c.mu.
func (c *Console) escapeStream(p []byte) []byte {
	if len(c.carry) > 0 {
		p = append(c.carry, p...)
		c.carry = nil
	}
	// Hold back a character the write has not finished.
	for n := 1; n <= utf8.UTFMax-1 && n <= len(p); n++ {
		if tail := p[len(p)-n:]; utf8.RuneStart(tail[0]) {
			if !utf8.FullRune(tail) {
				c.carry = append([]byte(nil), tail...)
				p = p[:len(p)-n]
			}
			break
		}
	}
	var out []byte
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r == '\n' || r == '\t':
			out = append(out, byte(r))
		case r < 0x80 && escapeRune(r):
			out = fmt.Appendf(out, `\x%02x`, r)
		case escapeRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		case r == '-' && c.match == len(marker)-1:
			out = append(out, `\x2d`...)
		default:
			out = append(out, p[i:i+n]...)
		}
		switch {
		case c.match < len(marker)-1 && r == rune(marker[c.match]):
			c.match++
		case r == rune(marker[0]):
			c.match = 1
		default:
			c.match = 0
		}
		i += n
	}
	return out
}
