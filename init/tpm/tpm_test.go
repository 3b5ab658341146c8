package tpm_test

import (
	"context"
	"crypto"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/pcr"
	"github.com/hotpath-dev/hotpath/init/boot"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/init/tpm"
)

// eventLog encodes events as a crypto-agile log with SHA-256 and SHA-384
// banks, the layout OVMF writes and the kernel passes through.
func eventLog(events map[crypto.Hash][]pcr.Event) []byte {
	le := binary.LittleEndian
	var b []byte
	u32 := func(v uint32) { b = le.AppendUint32(b, v) }
	u16 := func(v uint16) { b = le.AppendUint16(b, v) }
	spec := append([]byte("Spec ID Event03\x00"), make([]byte, 8)...)
	spec = le.AppendUint32(spec, 2)
	spec = le.AppendUint16(spec, 0x000b)
	spec = le.AppendUint16(spec, 32)
	spec = le.AppendUint16(spec, 0x000c)
	spec = le.AppendUint16(spec, 48)
	spec = append(spec, 0) // no vendor info
	u32(0)
	u32(3) // EV_NO_ACTION
	b = append(b, make([]byte, 20)...)
	u32(uint32(len(spec)))
	b = append(b, spec...)
	for i, e := range events[crypto.SHA256] {
		u32(uint32(e.PCR))
		u32(e.Type)
		u32(2)
		u16(0x000b)
		b = append(b, e.Digest...)
		u16(0x000c)
		b = append(b, events[crypto.SHA384][i].Digest...)
		u32(4)
		b = append(b, "data"...)
	}
	return b
}

// fakeTPM lays out the sysfs files of a TPM that measured efi as the
// firmware does, and returns the sysfs root.
func fakeTPM(t *testing.T, efi []byte) string {
	sys := t.TempDir()
	events := map[crypto.Hash][]pcr.Event{}
	for _, h := range pcr.Banks {
		ev, err := pcr.BootManager(efi, h)
		if err != nil {
			t.Fatal(err)
		}
		// A PCR 7 event between them, as OVMF interleaves.
		events[h] = append([]pcr.Event{{PCR: 7, Type: 4, Digest: make([]byte, h.Size())}}, ev...)
		bank := pcr.BankName(h)
		dir := filepath.Join(sys, "class/tpm/tpm0", "pcr-"+bank)
		os.MkdirAll(dir, 0o755)
		for _, n := range tpm.PCRs {
			v := strings.ToUpper(hex.EncodeToString(pcr.Replay(h, n, events[h])))
			os.WriteFile(filepath.Join(dir, strconv.Itoa(n)), []byte(v+"\n"), 0o644)
		}
	}
	log := filepath.Join(sys, "kernel/security/tpm0/binary_bios_measurements")
	os.MkdirAll(filepath.Dir(log), 0o755)
	os.WriteFile(log, eventLog(events), 0o644)
	return sys
}

func TestStep(t *testing.T) {
	efi := authenticodetest.PE([]byte("the appliance"), nil)
	sys := fakeTPM(t, efi)
	r := boot.RunOne(context.Background(), tpm.Step(sys))
	if r.Status != report.Applied {
		t.Fatalf("step %s: %s %s", r.Status, r.Error, r.Reason)
	}
	ref, _ := pcr.Reference(efi)
	if got, want := r.Detail["pcr4.sha384"], ref[0].Digests["sha384"]; got != want {
		t.Errorf("pcr4.sha384 = %s, want the reference %s", got, want)
	}
	app, _ := pcr.BootManager(efi, crypto.SHA256)
	if got, want := r.Detail["boot_app.sha256"], hex.EncodeToString(app[2].Digest); got != want {
		t.Errorf("boot_app.sha256 = %s, want %s", got, want)
	}
	if got, want := r.Detail["log.pcr4"], "EV_EFI_ACTION,EV_SEPARATOR,EV_EFI_BOOT_SERVICES_APPLICATION"; got != want {
		t.Errorf("log.pcr4 = %s, want %s", got, want)
	}
	if got := r.Detail["log.pcr7"]; got != "EV_SEPARATOR" {
		t.Errorf("log.pcr7 = %s, want the one separator", got)
	}
	if r.Detail["pcr12.sha256"] != strings.Repeat("0", 64) || r.Detail["pcr7.sha256"] == "" {
		t.Errorf("pcr7/12: %v", r.Detail)
	}

	// A PCR that the log does not replay to fails the step.
	os.WriteFile(filepath.Join(sys, "class/tpm/tpm0/pcr-sha256/4"), []byte(strings.Repeat("ab", 32)), 0o644)
	if r := boot.RunOne(context.Background(), tpm.Step(sys)); r.Status != report.Failed || !strings.Contains(r.Error, "replay") {
		t.Errorf("a PCR 4 the log does not explain: %s %q", r.Status, r.Error)
	}
}

func TestStepWithoutTPM(t *testing.T) {
	if r := boot.RunOne(context.Background(), tpm.Step(t.TempDir())); r.Status != report.Skipped {
		t.Errorf("without a TPM: %s %s", r.Status, r.Error)
	}
}

func TestParseEventLogTruncated(t *testing.T) {
	b := eventLog(map[crypto.Hash][]pcr.Event{
		crypto.SHA256: {{PCR: 4, Type: 4, Digest: make([]byte, 32)}},
		crypto.SHA384: {{PCR: 4, Type: 4, Digest: make([]byte, 48)}},
	})
	if _, err := tpm.ParseEventLog(b); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 10, 40, len(b) - 3} {
		if _, err := tpm.ParseEventLog(b[:n]); err == nil {
			t.Errorf("%d of %d bytes parsed without error", n, len(b))
		}
	}
}
