package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/machine"
	"github.com/hotpath-dev/hotpath/init/config"
)

// netdev returns the value of QEMU's -netdev argument.
func netdev(t *testing.T, args []string) string {
	t.Helper()
	i := slices.Index(args, "-netdev")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no -netdev in %q", args)
	}
	return args[i+1]
}

// The workload's port and the management port are both forwarded, each
// from its own loopback port; with the management forward off, only the
// workload's.
func TestQEMUArgsForwards(t *testing.T) {
	m, err := machine.For("amd64")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		mgmtHost int
		want     string
	}{
		{"both", 19100, "user,id=net0,ipv6-net=fd68:7074:6800::/64,hostfwd=tcp:127.0.0.1:18080-:8080,hostfwd=tcp:127.0.0.1:19100-:9100"},
		{"management off", 0, "user,id=net0,ipv6-net=fd68:7074:6800::/64,hostfwd=tcp:127.0.0.1:18080-:8080"},
	} {
		v := vm{Machine: m, Accel: "tcg", CPUs: 2, MemoryMiB: 512, HostAddr: "127.0.0.1",
			HostPort: 18080, GuestPort: 8080, MgmtHostPort: tc.mgmtHost, MgmtGuestPort: 9100}
		if got := netdev(t, qemuArgs(v)); got != tc.want {
			t.Errorf("%s: -netdev %s\nwant        %s", tc.name, got, tc.want)
		}
	}
}

func TestCheckPorts(t *testing.T) {
	base := vm{HostPort: 8080, GuestPort: 8080, MgmtHostPort: 9100, MgmtGuestPort: 9100}
	for _, tc := range []struct {
		name   string
		change func(*vm)
		ok     bool
	}{
		{"defaults", func(*vm) {}, true},
		{"management off", func(v *vm) { v.MgmtHostPort = 0 }, true},
		{"same host port", func(v *vm) { v.MgmtHostPort = 8080 }, false},
		{"same guest port", func(v *vm) { v.MgmtGuestPort = 8080 }, false},
		{"out of range", func(v *vm) { v.MgmtHostPort = 70000 }, false},
		{"no workload port", func(v *vm) { v.HostPort = 0 }, false},
	} {
		v := base
		tc.change(&v)
		if err := v.checkPorts(); (err == nil) != tc.ok {
			t.Errorf("%s: checkPorts = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// `run` with its defaults (what `make run` passes) forwards the image
// init's default workload and management ports and prints both URLs: a
// stand-in QEMU records the arguments it is started with.
func TestRunForwardsManagementPort(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "args")
	fakeQEMU := filepath.Join(dir, "qemu")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + record + "\n"
	files := map[string]string{fakeQEMU: script, "disk.img": "", "code.fd": "", "vars.fd": ""}
	for name, content := range files {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, name)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var stderr strings.Builder
	err := run([]string{"-arch", "amd64", "-disk", filepath.Join(dir, "disk.img"), "-qemu", fakeQEMU,
		"-ovmf-code", filepath.Join(dir, "code.fd"), "-ovmf-vars", filepath.Join(dir, "vars.fd")}, os.Stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Default()
	if d.WorkloadPort != 8080 || d.MgmtPort != 9100 {
		t.Fatalf("the init's defaults changed (%d, %d): update this test and the README", d.WorkloadPort, d.MgmtPort)
	}
	want := "user,id=net0,ipv6-net=fd68:7074:6800::/64,hostfwd=tcp:127.0.0.1:8080-:8080,hostfwd=tcp:127.0.0.1:9100-:9100"
	if got := netdev(t, strings.Split(strings.TrimSpace(string(b)), "\n")); got != want {
		t.Errorf("-netdev %s, want %s", got, want)
	}
	for _, url := range []string{"curl http://127.0.0.1:8080/json", "curl http://127.0.0.1:9100/metrics"} {
		if !strings.Contains(stderr.String(), url) {
			t.Errorf("the banner lacks %q:\n%s", url, stderr.String())
		}
	}

	stderr.Reset()
	if err := run([]string{"-disk", filepath.Join(dir, "disk.img"), "-mgmt-port", "8080"}, os.Stdout, &stderr); err == nil {
		t.Error("a management forward on the workload's host port was accepted")
	}
}
