package consoles

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// As Linux 6.12 prints it (fs/proc/consoles.c: "%-21s%c%c%c (%s)", then
// " %4d:%d" for a console with a tty) on an arm64 machine with both the
// PL011 and a PCI 16550 named on the command line, ttyS0 last.
const twoConsoles = "ttyAMA0              -W- (E  p a)  204:64\n" +
	"ttyS0                -W- (EC p a)    4:64\n" +
	"netcon0              -W- (E     )\n" +
	"ttyS1                -W- (   p a)    4:65\n"

func TestParse(t *testing.T) {
	cs, err := Parse(strings.NewReader(twoConsoles))
	if err != nil {
		t.Fatal(err)
	}
	want := []Console{
		{"ttyAMA0", true, false, "204:64"},
		{"ttyS0", true, true, "4:64"},
		{"netcon0", true, false, ""},
		{"ttyS1", false, false, "4:65"},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %+v", cs)
	}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, cs[i], want[i])
		}
	}
	// Only the enabled one with a tty that /dev/console does not reach.
	if o := Others(cs); len(o) != 1 || o[0].Name != "ttyAMA0" {
		t.Errorf("Others = %+v", o)
	}
	if _, err := Parse(strings.NewReader("garbage\n")); err == nil {
		t.Error("a line without flags parsed")
	}
}

func TestOpen(t *testing.T) {
	proc, dev := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(proc, "consoles"), []byte(twoConsoles), 0o644)
	os.WriteFile(filepath.Join(dev, "ttyAMA0"), nil, 0o644)
	var primary bytes.Buffer
	w, names, err := Open(proc, dev, &primary)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "ttyS0,ttyAMA0" {
		t.Errorf("names %v", names)
	}
	w.Write([]byte("HOTPATH-REPORT {}\n"))
	got, _ := os.ReadFile(filepath.Join(dev, "ttyAMA0"))
	if primary.String() != "HOTPATH-REPORT {}\n" || string(got) != "HOTPATH-REPORT {}\n" {
		t.Errorf("primary %q, ttyAMA0 %q", primary.String(), got)
	}

	// A console that cannot be opened is named; the primary still works.
	os.Remove(filepath.Join(dev, "ttyAMA0"))
	primary.Reset()
	w, _, err = Open(proc, dev, &primary)
	if err == nil || !strings.Contains(err.Error(), "ttyAMA0") {
		t.Errorf("err %v, want ttyAMA0 named", err)
	}
	w.Write([]byte("x\n"))
	if primary.String() != "x\n" {
		t.Errorf("primary %q", primary.String())
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("gone") }

// A failing secondary console does not fail the write.
func TestFanout(t *testing.T) {
	var a bytes.Buffer
	n, err := Fanout{&a, failing{}}.Write([]byte("abc"))
	if n != 3 || err != nil || a.String() != "abc" {
		t.Errorf("n %d err %v a %q", n, err, a.String())
	}
}
