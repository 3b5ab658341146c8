package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runFixture runs `go test -json` on a throwaway module whose tests pass,
// skip (with and without a reason, top level and subtest) and, if fail is
// set, fail.
func runFixture(t *testing.T, fail bool) []byte {
	t.Helper()
	dir := t.TempDir()
	src := `package fx

import "testing"

func TestPass(t *testing.T) {}

func TestSkipReason(t *testing.T) { t.Skip("needs a unicorn") }

func TestSkipSub(t *testing.T) {
	t.Run("inner", func(t *testing.T) { t.Log("looking"); t.Skipf("no %s here", "tap") })
}

func TestSkipBare(t *testing.T) { t.SkipNow() }
`
	if fail {
		src += "\nfunc TestFail(t *testing.T) { t.Error(\"broken on purpose\") }\n"
	}
	for name, text := range map[string]string{"go.mod": "module fx\n\ngo 1.22\n", "fx_test.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out
}

func TestSummariseSkips(t *testing.T) {
	var out bytes.Buffer
	res, err := Summarise(bytes.NewReader(runFixture(t, false)), &out)
	if err != nil {
		t.Fatal(err)
	}
	res.Report(&out)
	got := out.String()
	if !res.OK() {
		t.Errorf("a green run is not OK:\n%s", got)
	}
	for _, want := range []string{
		"ok  \tfx\t",
		"skipped tests (3):",
		"SKIP fx TestSkipReason: ",
		"needs a unicorn",
		"SKIP fx TestSkipSub/inner: ",
		"no tap here",
		"SKIP fx TestSkipBare: (no reason given)",
		"testsum: ok: 1 packages passed, 0 failed, 0 without tests; 0 tests failed, 3 skipped",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") || strings.Contains(got, "TestPass") {
		t.Errorf("verbose lines of passing tests leaked:\n%s", got)
	}
}

func TestSummariseFailure(t *testing.T) {
	var out bytes.Buffer
	res, err := Summarise(bytes.NewReader(runFixture(t, true)), &out)
	if err != nil {
		t.Fatal(err)
	}
	res.Report(&out)
	got := out.String()
	if res.OK() || res.FailedTests != 1 || res.Failed != 1 {
		t.Errorf("result %+v, want one failed test and package:\n%s", res, got)
	}
	for _, want := range []string{"--- FAIL: TestFail", "broken on purpose", "FAIL\tfx", "testsum: FAIL"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// TestSummariseNothing: an empty input (go test could not even start) is
// not green.
func TestSummariseNothing(t *testing.T) {
	res, err := Summarise(strings.NewReader("go: cannot find main module\n"), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() {
		t.Error("no package result counted as OK")
	}
}

// TestStream: -stream copies the passing tests' lines as they come (the
// e2e boots' progress) and still lists the skips and fails on a failure.
func TestStream(t *testing.T) {
	var out bytes.Buffer
	res, err := Stream(bytes.NewReader(runFixture(t, true)), &out)
	if err != nil {
		t.Fatal(err)
	}
	res.Report(&out)
	got := out.String()
	if res.OK() || res.FailedTests != 1 || len(res.Skips) != 3 {
		t.Errorf("result %+v, want one failed test and three skips:\n%s", res, got)
	}
	for _, want := range []string{"=== RUN   TestPass", "--- PASS: TestPass", "looking", "broken on purpose",
		"skipped tests (3):", "SKIP fx TestSkipSub/inner: ", "testsum: FAIL"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "broken on purpose"); n != 1 {
		t.Errorf("the failure's output printed %d times, want once:\n%s", n, got)
	}
}
