package console

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

// TestKernelHold: the console log level is lowered to HoldLevel while a
// report is sent and put back after, never raised, and a missing printk
// file holds nothing.
func TestKernelHold(t *testing.T) {
	for _, tc := range []struct {
		name, before, during string
	}{
		{"default", "7\t4\t1\t7\n", "4"},
		{"quiet already", "3\t4\t1\t7\n", "3\t4\t1\t7\n"},
		{"at the hold level", "4\t4\t1\t7\n", "4\t4\t1\t7\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			path := filepath.Join(proc, "sys/kernel/printk")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			r, w, err := os.Pipe() // not a tty: the drain returns at once
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			var during string
			c := &Console{Out: &bytes.Buffer{}, Hold: KernelHold(proc, w), Every: 1}
			c.OnLine(func(string) {
				b, _ := os.ReadFile(path)
				during = string(b)
			})
			c.Report(report.Report{Version: report.Version, ReadyMillis: 1})
			if during != tc.during {
				t.Errorf("printk while the report was written: %q, want %q", during, tc.during)
			}
			b, _ := os.ReadFile(path)
			if got := strings.Fields(string(b)); len(got) == 0 || got[0] != strings.Fields(tc.before)[0] {
				t.Errorf("printk after the report: %q, want the level of %q back", b, tc.before)
			}
		})
	}
	// No printk file (no /proc yet, or a test's root): nothing held, the
	// report is printed all the same.
	var out bytes.Buffer
	c := &Console{Out: &out, Hold: KernelHold(t.TempDir(), os.Stdout)}
	c.Report(report.Report{Version: report.Version, ReadyMillis: 1})
	if !strings.Contains(out.String(), report.ReportPrefix) {
		t.Errorf("no report printed without a printk file: %q", out.String())
	}
}

// TestHoldAroundReports: Hold is taken for the report and for each
// reprint of it, and released each time.
func TestHoldAroundReports(t *testing.T) {
	var held, released int
	c := &Console{Out: &bytes.Buffer{}, Every: 64, Hold: func() func() {
		held++
		return func() { released++ }
	}}
	c.Report(report.Report{Version: report.Version, ReadyMillis: 1})
	if held != 1 || released != 1 {
		t.Fatalf("after the report: held %d, released %d; want 1, 1", held, released)
	}
	for i := 0; i < 10; i++ {
		c.Logf("a line long enough to push the report past Every")
	}
	if c.Reprints() == 0 {
		t.Fatal("no reprint")
	}
	if held != 1+c.Reprints() || released != held {
		t.Errorf("after %d reprints: held %d, released %d", c.Reprints(), held, released)
	}
}
