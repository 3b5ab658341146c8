// Package nlcapture lets a test see the rtnetlink requests a step sends to
// the kernel, byte for byte, and the kernel's answer to them, where the
// kernel that runs the tests lacks the driver the request is for (the
// test machine's kernel has neither 8021q nor bonding, and no modules).
// Comparing those bytes with the attributes the kernel's uapi defines
// (include/uapi/linux/if_link.h) tests what goes below the fakes the
// steps' unit tests use.
//
// It runs the test binary again, in a new network namespace (unshare -n)
// under strace, which records each sendto's buffer: a Go program cannot be
// made to hand its netlink socket to a test otherwise (vishvananda/netlink
// opens its own), and the kernel offers no netlink monitor here (nlmon is
// not built).
package nlcapture

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ChildEnv is set in the re-run test binary: the test that calls Run is
// then its own child, and must call the code under test and Report.
const ChildEnv = "HOTPATH_NLCAPTURE_CHILD"

// Child reports whether this process is the re-run under strace.
func Child() bool { return os.Getenv(ChildEnv) != "" }

// Report ends the child: it prints err (or "ok") where Run reads it.
func Report(err error) {
	msg := "ok"
	if err != nil {
		msg = err.Error()
	}
	fmt.Printf("nlcapture-result: %s\n", msg)
	os.Exit(0)
}

// Message is one netlink message sent.
type Message struct {
	Type  uint16 // nlmsg_type, e.g. RTM_NEWLINK (16)
	Flags uint16
	Body  []byte // after the 16-byte nlmsghdr
}

// dumpLine is one line of strace's -e write= dump: " | 00000  34 00 ...
// 00  4.... |": the offset, then up to 16 bytes in hex.
var dumpLine = regexp.MustCompile(`^ \| [0-9a-f]{5}  ((?:[0-9a-f]{2} {1,2}){1,16})`)

// Run re-runs the current test (or subtest) as a child in a new network
// namespace under strace and returns the netlink messages it sent and
// what it reported. It skips the test where strace, unshare or root are
// missing, saying so.
func Run(t *testing.T) ([]Message, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace (unshare -n)")
	}
	for _, tool := range []string{"strace", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (Debian: strace, util-linux): %v", tool, err)
		}
	}
	out := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command("strace", "-f", "-qq", "-e", "trace=sendto", "-e", "write=all", "-o", out,
		"unshare", "-n", os.Args[0], "-test.run="+runPattern(t.Name()), "-test.count=1")
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("strace %s: %v\n%s", t.Name(), err, stdout)
	}
	var result string
	for _, l := range strings.Split(string(stdout), "\n") {
		if r, ok := strings.CutPrefix(l, "nlcapture-result: "); ok {
			result = r
		}
	}
	if result == "" {
		t.Fatalf("the child reported nothing:\n%s", stdout)
	}
	trace, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Each sendto line is followed by the dump of its buffer.
	var bufs [][]byte
	for _, l := range strings.Split(string(trace), "\n") {
		m := dumpLine.FindStringSubmatch(l)
		if m == nil {
			if strings.Contains(l, "sendto(") {
				bufs = append(bufs, nil)
			}
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(m[1], " ", ""))
		if err != nil || len(bufs) == 0 {
			t.Fatalf("strace dump line %q: %v", l, err)
		}
		bufs[len(bufs)-1] = append(bufs[len(bufs)-1], b...)
	}
	var msgs []Message
	for _, b := range bufs {
		for len(b) >= 16 {
			n := int(binary.LittleEndian.Uint32(b))
			if n < 16 || n > len(b) {
				break
			}
			msgs = append(msgs, Message{Type: binary.LittleEndian.Uint16(b[4:]), Flags: binary.LittleEndian.Uint16(b[6:]), Body: b[16:n]})
			b = b[(n+3)&^3:]
		}
	}
	return msgs, result
}

// runPattern is the -test.run value that selects exactly the test name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// Attrs parses a run of rtattrs (struct rtattr: u16 len, u16 type, the
// data, padded to 4 bytes) into a map by type, the nested flag
// (NLA_F_NESTED) cleared.
func Attrs(b []byte) map[uint16][]byte {
	m := map[uint16][]byte{}
	for len(b) >= 4 {
		n, typ := int(binary.LittleEndian.Uint16(b)), binary.LittleEndian.Uint16(b[2:])&^(1<<15)
		if n < 4 || n > len(b) {
			break
		}
		m[typ] = b[4:n]
		b = b[min((n+3)&^3, len(b)):]
	}
	return m
}
