package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asNobody runs a program as an unprivileged user: through setpriv when the
// test is root, as it is otherwise.
func asNobody(t *testing.T, dir, prog string, args ...string) (string, error) {
	t.Helper()
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
	}
	cmd.Dir = dir
	// No go on the PATH: the root checks must come before any build.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRootChecks: deps.sh's root group, .ci/run and `make deps-test` (the
// first prerequisite of `make test`) fail as a non-root user with the
// reason, before anything is built, even when every package is installed.
func TestRootChecks(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prog string
		args []string
		want string
	}{
		{filepath.Join(root, "image", "deps.sh"), []string{"root", "build", "test"}, "deps.sh: the tests need root"},
		{filepath.Join(root, ".ci", "run"), nil, "ci: must run as root"},
		{"make", []string{"-s", "test"}, "deps.sh: the tests need root"},
	} {
		out, err := asNobody(t, root, tc.prog, tc.args...)
		if err == nil {
			t.Errorf("%s %v succeeded as a non-root user:\n%s", tc.prog, tc.args, out)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%s %v: output %q lacks %q", tc.prog, tc.args, out, tc.want)
		}
		if strings.Contains(out, "go: ") || strings.Contains(out, "go vet") || strings.Contains(out, "kernel:") {
			t.Errorf("%s %v built something before the root check:\n%s", tc.prog, tc.args, out)
		}
	}
	// As root the check passes (deps.sh then only looks at packages).
	if os.Geteuid() == 0 {
		if out, err := exec.Command(filepath.Join(root, "image", "deps.sh"), "root").CombinedOutput(); err != nil {
			t.Errorf("deps.sh root as root: %v\n%s", err, out)
		}
	}
}
