package power

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestHasKey(t *testing.T) {
	for _, tc := range []struct {
		bitmap string
		want   bool
	}{
		{"10000000000000 0\n", true}, // ACPI "Power Button": bit 116 = word 1 bit 52
		{"4 10000000000000 0", true}, // a longer bitmap
		{"0", false},                 // no keys
		{"3803078f800d001 feefffdfffefffff fffffffffffffffe", false}, // a keyboard without KEY_POWER (word 1 bit 52 clear)
		{"3803078f800d001 feefffdfffefffff fffffffffffffffe 0", true},
	} {
		got, err := HasKey(tc.bitmap, KeyPower)
		if err != nil || got != tc.want {
			t.Errorf("HasKey(%q) = %v, %v; want %v", tc.bitmap, got, err, tc.want)
		}
	}
	if _, err := HasKey("zz", KeyPower); err == nil {
		t.Error("bad bitmap accepted")
	}
}

func TestFind(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir()
	add := func(ev, name, keys string) {
		d := filepath.Join(sys, "class/input", ev, "device")
		os.MkdirAll(filepath.Join(d, "capabilities"), 0o755)
		os.WriteFile(filepath.Join(d, "name"), []byte(name+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "capabilities/key"), []byte(keys+"\n"), 0o644)
	}
	add("event0", "Power Button", "10000000000000 0")
	add("event1", "AT Translated Set 2 keyboard", "402000000 3803078f800d001 feefffdfffefffff fffffffffffffffe")
	os.MkdirAll(filepath.Join(sys, "class/input/input0"), 0o755)
	devs, err := Find(sys, dev)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].Name != "event0" || devs[0].Desc != "Power Button" || devs[0].Path != filepath.Join(dev, "input/event0") {
		t.Errorf("Find = %+v", devs)
	}
}

func TestWaitPress(t *testing.T) {
	var b bytes.Buffer
	b.Write(Encode(0x04, 0x04, 116))    // EV_MSC
	b.Write(Encode(evKey, 30, 1))       // KEY_A
	b.Write(Encode(evKey, KeyPower, 0)) // release first: not a press
	b.Write(Encode(0, 0, 0))            // EV_SYN
	if err := WaitPress(bytes.NewReader(b.Bytes())); err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Errorf("WaitPress without a press = %v, want EOF", err)
	}
	b.Write(Encode(evKey, KeyPower, 1))
	if err := WaitPress(&b); err != nil {
		t.Errorf("WaitPress = %v", err)
	}
}
