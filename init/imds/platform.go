package imds

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EC2Vendor is the SMBIOS system (and baseboard) manufacturer of Nitro
// instances.
const EC2Vendor = "Amazon EC2"

// Platform is what the init found out about the machine it runs on.
type Platform struct {
	EC2 bool
	// Why says which evidence decided, e.g. "sys_vendor=Amazon EC2" or
	// "dmi table: system manufacturer QEMU".
	Why string
}

// Detect decides from DMI whether this is an EC2 instance, reading under
// root ("/" on the machine, a temporary directory in tests). It reads the
// sysfs attributes /sys/class/dmi/id/{sys_vendor,board_vendor,bios_version}
// when the kernel exports them (CONFIG_DMIID), else the raw SMBIOS table
// /sys/firmware/dmi/tables/DMI that every CONFIG_DMI kernel exports (the
// appliance kernel has DMI but not DMIID). EC2 says so in two ways: Nitro
// instances have manufacturer "Amazon EC2"; Xen instances have a BIOS
// version ending in ".amazon". Nothing here touches the network, so a
// machine that is not EC2 (QEMU, another cloud) decides in microseconds.
func Detect(root string) Platform {
	id := filepath.Join(root, "sys/class/dmi/id")
	if v, err := os.ReadFile(filepath.Join(id, "sys_vendor")); err == nil {
		sys := strings.TrimSpace(string(v))
		board := readTrim(filepath.Join(id, "board_vendor"))
		bios := readTrim(filepath.Join(id, "bios_version"))
		return decide(sys, board, bios, "dmi id")
	}
	table, err := os.ReadFile(filepath.Join(root, "sys/firmware/dmi/tables/DMI"))
	if err != nil {
		return Platform{Why: fmt.Sprintf("no DMI: %v", err)}
	}
	s, err := ParseSMBIOS(table)
	if err != nil {
		return Platform{Why: err.Error()}
	}
	return decide(s.SystemVendor, s.BoardVendor, s.BIOSVersion, "dmi table")
}

func decide(sys, board, bios, from string) Platform {
	what := fmt.Sprintf("%s: sys_vendor %q, board_vendor %q, bios_version %q", from, sys, board, bios)
	ec2 := sys == EC2Vendor || board == EC2Vendor || strings.HasSuffix(strings.ToLower(bios), ".amazon")
	return Platform{EC2: ec2, Why: what}
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SMBIOS holds the strings Detect needs from an SMBIOS structure table.
type SMBIOS struct {
	BIOSVendor, BIOSVersion string // type 0
	SystemVendor            string // type 1
	BoardVendor             string // type 2
}

// ParseSMBIOS walks an SMBIOS structure table (the content of
// /sys/firmware/dmi/tables/DMI): each structure is a header (type, length,
// handle), a formatted area of that length, then its strings, each
// NUL-terminated, the set ended by an extra NUL. A string field holds a
// 1-based index into the set; 0 means none.
func ParseSMBIOS(t []byte) (SMBIOS, error) {
	var s SMBIOS
	for len(t) > 0 {
		if len(t) < 4 {
			return s, fmt.Errorf("dmi table: truncated structure header")
		}
		typ, n := t[0], int(t[1])
		if n < 4 || n > len(t) {
			return s, fmt.Errorf("dmi table: type %d structure length %d out of bounds", typ, n)
		}
		formatted := t[:n]
		end := bytes.Index(t[n:], []byte{0, 0})
		if end < 0 {
			return s, fmt.Errorf("dmi table: type %d structure without string set end", typ)
		}
		strs := bytes.Split(t[n:n+end], []byte{0})
		if end == 0 {
			strs = nil
		}
		str := func(off int) string {
			if off >= len(formatted) {
				return ""
			}
			i := int(formatted[off])
			if i == 0 || i > len(strs) {
				return ""
			}
			return strings.TrimSpace(string(strs[i-1]))
		}
		switch typ {
		case 0:
			s.BIOSVendor, s.BIOSVersion = str(4), str(5)
		case 1:
			s.SystemVendor = str(4)
		case 2:
			s.BoardVendor = str(4)
		case 127: // end of table
			return s, nil
		}
		t = t[n+end+2:]
	}
	return s, nil
}

// Decide applies the imds mode (auto, on, off) to the platform found under
// root: whether the init asks the metadata service, and why.
func Decide(mode, root string) (bool, string) {
	switch mode {
	case "off":
		return false, "imds=off"
	case "on":
		return true, "imds=on"
	}
	p := Detect(root)
	if !p.EC2 {
		return false, "imds=auto and not EC2 (" + p.Why + ")"
	}
	return true, "imds=auto: EC2 (" + p.Why + ")"
}
