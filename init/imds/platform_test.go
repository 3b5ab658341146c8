package imds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smbios builds a structure table: one structure per entry, each with a
// string at index 1 in its first string field (and a second string for
// type 0's version).
func smbios(entries ...[]string) []byte {
	var t []byte
	for _, e := range entries {
		typ := e[0]
		switch typ {
		case "0":
			// type 0: vendor (4) = 1, version (5) = 2
			t = append(t, 0, 0x18, 0, 0, 1, 2)
			t = append(t, make([]byte, 0x18-6)...)
		case "1":
			t = append(t, 1, 0x1b, 1, 0, 1)
			t = append(t, make([]byte, 0x1b-5)...)
		case "2":
			t = append(t, 2, 0x0f, 2, 0, 1)
			t = append(t, make([]byte, 0x0f-5)...)
		case "127":
			t = append(t, 127, 4, 0xff, 0xfe, 0, 0)
			continue
		}
		for _, s := range e[1:] {
			t = append(t, s...)
			t = append(t, 0)
		}
		t = append(t, 0)
	}
	return t
}

func TestParseSMBIOS(t *testing.T) {
	tab := smbios([]string{"0", "Amazon EC2", "1.0"}, []string{"1", "Amazon EC2", "c5n.xlarge"}, []string{"2", "Amazon EC2"}, []string{"127"})
	s, err := ParseSMBIOS(tab)
	if err != nil {
		t.Fatal(err)
	}
	if s.SystemVendor != "Amazon EC2" || s.BoardVendor != "Amazon EC2" || s.BIOSVersion != "1.0" {
		t.Errorf("%+v", s)
	}
	for _, bad := range [][]byte{
		{1, 0x1b, 0},             // truncated header
		{1, 0x40, 0, 0, 1, 0, 0}, // length beyond the table
		{1, 5, 0, 0, 1, 'Q', 0},  // no double NUL
		{1, 2, 0, 0, 0, 0, 0, 0}, // length below the header
	} {
		if _, err := ParseSMBIOS(bad); err == nil {
			t.Errorf("% x: no error", bad)
		}
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		ec2   bool
		why   string
	}{
		{"no dmi at all", nil, false, "no DMI"},
		{"nitro via dmi id", map[string][]byte{"sys/class/dmi/id/sys_vendor": []byte("Amazon EC2\n")}, true, "dmi id"},
		{"board vendor only", map[string][]byte{"sys/class/dmi/id/sys_vendor": []byte("\n"), "sys/class/dmi/id/board_vendor": []byte("Amazon EC2\n")}, true, ""},
		{"xen instance", map[string][]byte{"sys/class/dmi/id/sys_vendor": []byte("Xen\n"), "sys/class/dmi/id/bios_version": []byte("4.11.amazon\n")}, true, ""},
		{"qemu via dmi id", map[string][]byte{"sys/class/dmi/id/sys_vendor": []byte("QEMU\n")}, false, "QEMU"},
		{"nitro via table", map[string][]byte{"sys/firmware/dmi/tables/DMI": smbios([]string{"1", "Amazon EC2"}, []string{"127"})}, true, "dmi table"},
		{"qemu via table", map[string][]byte{"sys/firmware/dmi/tables/DMI": smbios([]string{"0", "EFI Development Kit II / OVMF", "0.0.0"}, []string{"1", "QEMU"})}, false, "QEMU"},
		{"another cloud", map[string][]byte{"sys/firmware/dmi/tables/DMI": smbios([]string{"1", "Google"}, []string{"2", "Google"})}, false, "Google"},
		{"corrupt table", map[string][]byte{"sys/firmware/dmi/tables/DMI": {1, 0x40}}, false, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, b := range tc.files {
				p = filepath.Join(root, p)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p := Detect(root)
			if p.EC2 != tc.ec2 || !strings.Contains(p.Why, tc.why) {
				t.Errorf("Detect = %+v, want EC2 %v and why containing %q", p, tc.ec2, tc.why)
			}
			on, why := Decide("auto", root)
			if on != tc.ec2 || !strings.HasPrefix(why, "imds=auto") {
				t.Errorf("Decide(auto) = %v, %q", on, why)
			}
			if on, _ := Decide("on", root); !on {
				t.Error("imds=on not honoured")
			}
			if on, _ := Decide("off", root); on {
				t.Error("imds=off not honoured")
			}
		})
	}
}
