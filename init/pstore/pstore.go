// Package pstore reports what a crashed previous boot left behind: the
// kernel's last log lines before a panic or an oops, which the kernel's
// pstore kept across the reboot (panic=10 reboots, and the next boot's
// console would otherwise overwrite the only copy an operator had).
//
// # Why EFI variables (efi-pstore) and not ramoops
//
// On panic the kernel calls its kmsg dumpers (kmsg_dump(KMSG_DUMP_PANIC),
// after the "Kernel panic - not syncing" line and the stack trace); pstore
// is one, and hands the newest CONFIG_PSTORE_DEFAULT_KMSG_BYTES (10 KiB)
// of the log, compressed, to its backend in records of 1 KiB.
//
//   - efi-pstore writes each record as a non-volatile EFI variable
//     (dump-type0-PART-COUNT-TIME-C, LINUX_EFI_CRASH_GUID) through the
//     firmware's runtime SetVariable, the non-blocking variant that is safe
//     in the panic path. Every UEFI machine the appliance targets has a
//     non-volatile variable store: OVMF and AAVMF keep it in the writable
//     flash image QEMU is given (unit 1, which survives the guest's reset
//     because it is a file on the host: the panic test in tests/e2e reads
//     the panic back after QEMU's reset), and EC2's UEFI keeps an
//     instance's non-volatile variables (the store GetInstanceUefiData
//     returns, which also holds its Secure Boot keys) across reboots; that
//     a panic's records survive there is documented, not yet observed on
//     an instance. No command-line option is needed: pstore registers its
//     dumper for panics and oopses by default (max_reason OOPS), and the
//     backend is the first one registered.
//     One sysrq panic took 12 to 13 records (about 13 KiB of variables,
//     since kmsg_bytes counts compressed bytes) in the QEMU test; the next
//     boot deletes them, so the store fills only with boots that crash
//     before the init runs (pstore.kmsg_bytes on the command line would
//     bound a dump further).
//   - ramoops needs memory that no one touches between the panic and the
//     next kernel, named on the command line (ramoops.mem_address) and
//     reserved in the firmware's memory map. A warm reset through the
//     firmware gives no such promise: OVMF and AAVMF reinitialise and reuse
//     RAM as they please on a reset, and on EC2 a reboot may land the
//     instance on freshly scrubbed memory. The kernel is built without
//     PSTORE_RAM for that reason.
//
// The package mounts pstore (/sys/fs/pstore), reads every dmesg record,
// puts the parts of each dump back in order (Part1 holds the newest lines),
// summarises the most severe dump in a report.PreviousBoot, and removes the
// files: unlinking a pstore file erases its record in the backend (the EFI
// variable is deleted), so each crash is reported by one boot only.
package pstore

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Dir is where the kernel's pstore file system is mounted.
const Dir = "/sys/fs/pstore"

// Record is one file in the pstore file system.
type Record struct {
	Name string // "dmesg-efi_pstore-173301234501001"
	// Type is the record's kind ("dmesg", "console", "pmsg", ...); Backend
	// the pstore backend that wrote it.
	Type, Backend string
	// Compressed is true for a record the kernel could not decompress
	// (".enc.z"): its data is not text.
	Compressed bool
	Data       []byte
}

// Dump is one kmsg dump: the parts of one panic or oops put back together.
type Dump struct {
	Reason string // as the kernel names it: "Panic", "Oops", "Emergency", ...
	Count  int    // the dump's number since the crashed kernel booted
	Lines  []string
}

// Read reads every record in dir.
func Read(dir string) ([]Record, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return recs, fmt.Errorf("pstore: %w", err)
		}
		recs = append(recs, parseName(e.Name(), b))
	}
	return recs, nil
}

// parseName splits "TYPE-BACKEND-ID[.enc.z]" (fs/pstore/inode.c). The
// backend's name may itself hold no dash ("efi_pstore", "ramoops").
func parseName(name string, data []byte) Record {
	r := Record{Name: name, Data: data}
	base, compressed := strings.CutSuffix(name, ".enc.z")
	r.Compressed = compressed
	parts := strings.Split(base, "-")
	if len(parts) >= 3 {
		r.Type, r.Backend = parts[0], strings.Join(parts[1:len(parts)-1], "-")
	}
	return r
}

// header is the first line the kernel writes into every dmesg record:
// "Panic#1 Part1" (fs/pstore/platform.c, pstore_dump).
var header = regexp.MustCompile(`^([A-Za-z]+)#(\d+) Part(\d+)$`)

// part is one record of a dump.
type part struct {
	n     int
	lines []string
}

// Dumps puts the dmesg records back together, one Dump per reason and
// count, oldest dump first. Part1 holds a dump's newest lines, Part2 the
// ones before, so the parts are joined from the highest number down.
// Records that are not dmesg text are left out.
func Dumps(recs []Record) []Dump {
	type key struct {
		reason string
		count  int
	}
	parts := map[key][]part{}
	for _, r := range recs {
		if r.Type != "dmesg" || r.Compressed {
			continue
		}
		first, rest, _ := bytes.Cut(r.Data, []byte("\n"))
		m := header.FindStringSubmatch(strings.TrimSpace(string(first)))
		if m == nil {
			continue
		}
		count, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		k := key{m[1], count}
		parts[k] = append(parts[k], part{n: n, lines: splitLines(rest)})
	}
	var out []Dump
	for k, ps := range parts {
		slices.SortFunc(ps, func(a, b part) int { return cmp.Compare(b.n, a.n) })
		d := Dump{Reason: k.reason, Count: k.count}
		for _, p := range ps {
			d.Lines = append(d.Lines, p.lines...)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Dump) int {
		return cmp.Or(cmp.Compare(a.Count, b.Count), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// splitLines returns the lines of a record without the syslog priority
// ("<0>") that kmsg_dump_get_buffer puts before each.
func splitLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		if len(l) > 2 && l[0] == '<' {
			if i := strings.IndexByte(l, '>'); i > 0 && i <= 4 {
				l = l[i+1:]
			}
		}
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// severity orders the dump reasons: a panic says more than the oops that
// led to it.
func severity(reason string) int {
	switch reason {
	case "Panic":
		return 4
	case "Oops":
		return 3
	case "Emergency":
		return 2
	case "Shutdown":
		return 1
	}
	return 0
}

// Worst is the dump to report: the most severe, the latest of those.
func Worst(dumps []Dump) (Dump, bool) {
	if len(dumps) == 0 {
		return Dump{}, false
	}
	w := dumps[0]
	for _, d := range dumps[1:] {
		if severity(d.Reason) >= severity(w.Reason) {
			w = d
		}
	}
	return w, true
}

// Headline is the dump's line that names the crash: the kernel's "Kernel
// panic - not syncing: ..." line, else the oops's "BUG:" or "Oops:" line,
// else its last line. The printk timestamp is dropped.
func (d Dump) Headline() string {
	if i := d.headlineAt(); i >= 0 {
		return stripTime(d.Lines[i])
	}
	if len(d.Lines) == 0 {
		return ""
	}
	return stripTime(d.Lines[len(d.Lines)-1])
}

// headlineAt is the index of the headline line, -1 if none is found.
func (d Dump) headlineAt() int {
	for _, want := range []string{"Kernel panic - not syncing", "BUG:", "Oops:", "general protection fault"} {
		for i := len(d.Lines) - 1; i >= 0; i-- {
			if strings.Contains(d.Lines[i], want) {
				return i
			}
		}
	}
	return -1
}

// stripTime drops the "[   12.345678] " printk puts before a line.
func stripTime(l string) string {
	if strings.HasPrefix(l, "[") {
		if i := strings.IndexByte(l, ']'); i > 0 {
			return strings.TrimSpace(l[i+1:])
		}
	}
	return l
}

// Clear removes the records, which erases them in the backend, and checks
// that they are gone.
func Clear(dir string, recs []Record) error {
	var errs []error
	for _, r := range recs {
		if err := os.Remove(filepath.Join(dir, r.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, r := range recs {
		if _, err := os.Stat(filepath.Join(dir, r.Name)); err == nil {
			errs = append(errs, fmt.Errorf("%s still there after removal", r.Name))
		}
	}
	return errors.Join(errs...)
}
