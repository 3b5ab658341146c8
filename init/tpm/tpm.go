// Package tpm reads what the firmware measured into the TPM, for the boot
// report: PCR 4 (boot manager code: the EFI binary), PCR 7 (Secure Boot
// policy) and PCR 12 (what attestable AMIs expect the passed command line
// in), in the SHA-256 and SHA-384 banks, and the event log's entries for
// PCR 4. A reader outside the guest compares them with the manifest's
// reference values (`hotpath-image report -manifest`).
//
// The PCRs are read through the kernel's sysfs files
// (/sys/class/tpm/tpm0/pcr-<bank>/<n>, Linux 5.12 and later), for which the
// kernel sends TPM2_PCR_Read itself: no TPM command code in PID 1 and no
// contention with a workload that opens /dev/tpmrm0.
package tpm

import (
	"context"
	"crypto"
	_ "crypto/sha256" // the banks
	_ "crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hotpath-dev/hotpath/init/boot"
)

// StepName is the boot step's name in the report.
const StepName = "tpm"

// PCRs are the registers reported.
var PCRs = []int{4, 7, 12}

// Banks are the banks reported, by sysfs name.
var Banks = map[string]crypto.Hash{"sha256": crypto.SHA256, "sha384": crypto.SHA384}

// Paths below the sysfs root.
const (
	classDir    = "class/tpm/tpm0"
	securityDir = "kernel/security"
	eventLog    = "kernel/security/tpm0/binary_bios_measurements"
)

// Step reads the TPM below sysRoot ("/sys"). Without a TPM it is skipped.
// Detail keys: pcr<N>.<bank> (hex), boot_app.<bank> (the digests of the
// log's EV_EFI_BOOT_SERVICES_APPLICATION entries, comma-separated),
// log.pcr4 and log.pcr7 (those PCRs' event types in order). Verify replays the log's PCR 4
// events and fails when they do not give the PCR read.
func Step(sysRoot string) boot.Step {
	var events []Event
	return boot.Step{Name: StepName, Apply: func(_ context.Context, d boot.Detail) error {
		if _, err := os.Stat(filepath.Join(sysRoot, classDir)); err != nil {
			return boot.Skip("no TPM (%s)", filepath.Join(sysRoot, classDir))
		}
		var errs []error
		for bank := range Banks {
			for _, n := range PCRs {
				v, err := ReadPCR(sysRoot, bank, n)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				d[fmt.Sprintf("pcr%d.%s", n, bank)] = v
			}
		}
		var err error
		events, err = readEventLog(sysRoot)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		describe(events, d)
		return errors.Join(errs...)
	}, Verify: func(_ context.Context, d boot.Detail) error {
		for bank, h := range Banks {
			got := hex.EncodeToString(Replay(events, 4, h))
			if want := d["pcr4."+bank]; got != want {
				return fmt.Errorf("the event log's PCR 4 events replay to %s in %s, the TPM holds %s", got, bank, want)
			}
		}
		return nil
	}}
}

// ReadPCR reads one PCR of a bank from sysfs, as lower-case hex.
func ReadPCR(sysRoot, bank string, n int) (string, error) {
	b, err := os.ReadFile(filepath.Join(sysRoot, classDir, "pcr-"+bank, strconv.Itoa(n)))
	if err != nil {
		return "", fmt.Errorf("tpm: pcr %d %s: %w", n, bank, err)
	}
	return strings.ToLower(strings.TrimSpace(string(b))), nil
}

// readEventLog mounts securityfs when it is not, and parses the firmware's
// event log.
func readEventLog(sysRoot string) ([]Event, error) {
	p := filepath.Join(sysRoot, eventLog)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("securityfs", filepath.Join(sysRoot, securityDir), "securityfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("tpm: mount securityfs: %w", err)
		}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("tpm: event log: %w", err)
	}
	return ParseEventLog(b)
}

// describe puts PCR 4's log entries into the detail.
func describe(events []Event, d boot.Detail) {
	var types, types7 []string
	apps := map[string][]string{}
	for _, e := range events {
		if e.PCR == 7 {
			types7 = append(types7, TypeName(e.Type))
		}
		if e.PCR != 4 {
			continue
		}
		types = append(types, TypeName(e.Type))
		if e.Type != evEFIBootServicesApplication {
			continue
		}
		for bank, h := range Banks {
			apps[bank] = append(apps[bank], hex.EncodeToString(e.Digests[h]))
		}
	}
	d["log.pcr4"] = strings.Join(types, ",")
	d["log.pcr7"] = strings.Join(types7, ",")
	for bank, v := range apps {
		d["boot_app."+bank] = strings.Join(v, ",")
	}
}
