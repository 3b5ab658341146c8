package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/diskfs/go-diskfs"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/disk"
)

// pcrsCmd prints the reference PCR values of a disk's EFI binary, read
// from the disk's ESP (not from a manifest), so that it checks a disk whose
// manifest is not at hand or not trusted.
func pcrsCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pcrs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: hotpath-image pcrs DISK

Reads the EFI binary from the disk's EFI system partition and prints the PCR
values a TPM 2.0 holds once UEFI firmware (OVMF, EC2 NitroTPM) has started it,
in the SHA-256 and SHA-384 banks: PCR 4 (the boot application's Authenticode
digest after the firmware's "Calling EFI Application" action and separator)
and PCR 12 (no command line is passed: its reset value). Whether the binary is
signed, and by whom, is printed too.
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one disk expected")
	}
	efi, bootPath, err := readBootFile(fs.Arg(0))
	if err != nil {
		return err
	}
	ms, err := image.Measurements(efi)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d bytes, %s\n", bootPath, len(efi), signedState(efi))
	for _, m := range ms {
		fmt.Fprintf(stdout, "pcr%-2d sha256 %s\n      sha384 %s\n", m.PCR, m.SHA256, m.SHA384)
	}
	return nil
}

func signedState(efi []byte) string {
	l, err := authenticode.Parse(efi)
	if err != nil || !l.Signed() {
		return "unsigned"
	}
	return "signed (Authenticode)"
}

// readBootFile reads the loader from the first partition's FAT file
// system, at either architecture's removable-media path.
func readBootFile(name string) ([]byte, string, error) {
	d, err := diskfs.Open(name, diskfs.WithOpenMode(diskfs.ReadOnly))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	defer d.Close()
	fsys, err := d.GetFilesystem(1)
	if err != nil {
		return nil, "", fmt.Errorf("%s: EFI system partition: %w", name, err)
	}
	for _, p := range []string{disk.BootPath, disk.BootPathAA64} {
		f, err := fsys.OpenFile("/"+p, os.O_RDONLY)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, "", fmt.Errorf("%s: %s: %w", name, p, err)
		}
		return b, "/" + p, nil
	}
	return nil, "", fmt.Errorf("%s: no %s", name, strings.Join([]string{disk.BootPath, disk.BootPathAA64}, " or "))
}
