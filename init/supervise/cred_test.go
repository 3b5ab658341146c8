package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// status starts a real process with p's attributes and returns the lines
// of its /proc/self/status that describe its credentials.
func status(t *testing.T, p *Privileges) map[string]string {
	t.Helper()
	cmd := exec.Command("/bin/cat", "/proc/self/status")
	cmd.SysProcAttr = p.SysProcAttr()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("start with %+v: %v", p, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

func TestPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change credentials")
	}
	for _, tc := range []struct {
		name             string
		p                *Privileges
		uid, gid, groups string
		amb, eff         string
	}{
		{"nil is root", nil, "0 0 0 0", "0 0 0 0", "", "0000000000000000", ""},
		{"unprivileged, no caps", &Privileges{UID: 65534, GID: 65534}, "65534 65534 65534 65534", "65534 65534 65534 65534", "", "0000000000000000", "0000000000000000"},
		{"net_bind_service", &Privileges{UID: 1000, GID: 2000, Caps: []uintptr{10}}, "1000 1000 1000 1000", "2000 2000 2000 2000", "", "0000000000000400", "0000000000000400"},
		{"net_bind_service and net_admin", &Privileges{UID: 65534, GID: 65534, Caps: []uintptr{10, 12}}, "65534 65534 65534 65534", "65534 65534 65534 65534", "", "0000000000001400", "0000000000001400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := status(t, tc.p)
			if st["Uid"] != tc.uid || st["Gid"] != tc.gid || st["Groups"] != tc.groups || st["CapAmb"] != tc.amb {
				t.Errorf("Uid %q Gid %q Groups %q CapAmb %q; want %q %q %q %q", st["Uid"], st["Gid"], st["Groups"], st["CapAmb"], tc.uid, tc.gid, tc.groups, tc.amb)
			}
			if tc.p.Root() {
				// Root keeps whatever this test process has.
				return
			}
			if st["CapEff"] != tc.eff || st["CapPrm"] != tc.eff {
				t.Errorf("CapEff %q CapPrm %q, want %q", st["CapEff"], st["CapPrm"], tc.eff)
			}
		})
	}
}

// TestLockNoNewPrivs builds a helper without cgo (as the init is built)
// that locks no_new_privs and starts children from many threads: every
// child must have it, whichever thread forked it.
func TestLockNoNewPrivs(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "nnp")
	build := exec.Command("go", "build", "-o", bin, "./testdata/nnp")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build helper: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "32/32" {
		t.Errorf("children with NoNewPrivs: %s, want 32/32", got)
	}
}
