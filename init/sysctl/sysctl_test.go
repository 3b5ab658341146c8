package sysctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
)

func TestSteps(t *testing.T) {
	root := t.TempDir()
	// A fake /proc/sys with some of the files; tcp_congestion_control is
	// missing (kernel without the feature) and busy_read is read-only.
	files := map[string]string{
		"net/core/busy_poll":           "0\n",
		"net/core/busy_read":           "0\n",
		"net/core/somaxconn":           "4096\n",
		"net/ipv4/tcp_rmem":            "4096\t131072\t6291456\n",
		"net/core/default_qdisc":       "pfifo_fast\n",
		"net/ipv4/tcp_max_syn_backlog": "512\n",
	}
	for name, v := range files {
		p := filepath.Join(root, "sys", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ro := Path(root, "net.core.busy_read")
	if err := os.Chmod(ro, 0o444); err != nil {
		t.Fatal(err)
	}
	// Root ignores file modes; make the write fail differently when root:
	// replace the file by a directory.
	if os.Geteuid() == 0 {
		os.Remove(ro)
		os.Mkdir(ro, 0o755)
	}
	settings := Merge(Defaults(50, 50)[:6], []string{"net.core.somaxconn", "net.ipv4.tcp_rmem"},
		map[string]string{"net.core.somaxconn": "1024", "net.ipv4.tcp_rmem": "4096 262144 8388608"})
	res := boot.Run(context.Background(), Steps(root, settings), nil)
	want := map[string]report.Status{
		"sysctl net.core.busy_poll":              report.Applied,
		"sysctl net.core.busy_read":              report.Failed,
		"sysctl net.core.somaxconn":              report.Applied,
		"sysctl net.ipv4.tcp_max_syn_backlog":    report.Applied,
		"sysctl net.core.default_qdisc":          report.Applied,
		"sysctl net.ipv4.tcp_congestion_control": report.Skipped,
		"sysctl net.ipv4.tcp_rmem":               report.Applied,
	}
	if len(res) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(res), len(want), res)
	}
	for _, r := range res {
		if want[r.Name] != r.Status {
			t.Errorf("%s: %s (%s%s), want %s", r.Name, r.Status, r.Reason, r.Error, want[r.Name])
		}
		if r.Status == report.Skipped && !strings.Contains(r.Reason, "tcp_congestion_control does not exist") {
			t.Errorf("%s: reason %q does not name the missing file", r.Name, r.Reason)
		}
	}
	for name, v := range map[string]string{
		"net.core.busy_poll": "50", "net.core.somaxconn": "1024", "net.core.default_qdisc": "pfifo_fast",
		"net.ipv4.tcp_rmem": "4096 262144 8388608", "net.ipv4.tcp_max_syn_backlog": "65535",
	} {
		if got, err := Read(root, name); err != nil || got != v {
			t.Errorf("%s = %q, %v; want %q", name, got, err, v)
		}
	}
}

func TestVerifyCatchesKernelRefusal(t *testing.T) {
	// A file that keeps its old content after a write, like a sysctl that
	// rejects a value by clamping it, must fail verification.
	root := t.TempDir()
	p := Path(root, "net.core.somaxconn")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("4096\n"), 0o644)
	s := Step(root, Setting{"net.core.somaxconn", "65535"})
	s.Apply = func(context.Context, boot.Detail) error { return nil } // the "kernel" ignored it
	if r := boot.RunOne(context.Background(), s); r.Status != report.Failed || !strings.Contains(r.Error, `"4096"`) {
		t.Errorf("got %+v, want failed verify naming the value read back", r)
	}
}
