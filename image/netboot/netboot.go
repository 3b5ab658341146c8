// Package netboot serves a built appliance to machines that boot from the
// network: the single EFI binary (kernel, initramfs and command line) is
// the whole system, so a dedicated server's firmware can fetch it by UEFI
// HTTP boot, by UEFI PXE over TFTP, or through iPXE, and run it with no
// disk at all. The binary is cut out of the built disk (where the manifest
// says it is) and checked against the manifest's hash, so what is served
// is exactly what the disk and the AMI boot.
package netboot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/hotpath-dev/hotpath/image/manifest"
)

// Image is a built image's EFI binary, ready to serve.
type Image struct {
	// Name is the file name it is served as: the ESP boot path's base
	// name (BOOTX64.EFI, BOOTAA64.EFI).
	Name string
	EFI  []byte
	M    *manifest.Manifest
}

// Load reads manifest.json and the disk beside it in dir and returns the
// EFI binary, refusing one whose SHA-256 is not the manifest's.
func Load(dir string) (*Image, error) {
	m, err := manifest.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("netboot: %w", err)
	}
	f, err := os.Open(filepath.Join(dir, m.Disk.File))
	if err != nil {
		return nil, fmt.Errorf("netboot: %w", err)
	}
	defer f.Close()
	efi := make([]byte, m.EFI.Size)
	if _, err := f.ReadAt(efi, m.Disk.ESP.BootPathOff); err != nil {
		return nil, fmt.Errorf("netboot: read the EFI binary from %s: %w", f.Name(), err)
	}
	h := sha256.Sum256(efi)
	if got := hex.EncodeToString(h[:]); got != m.EFI.SHA256 {
		return nil, fmt.Errorf("netboot: the EFI binary in %s has sha256 %s, the manifest says %s: disk and manifest are not from one build", f.Name(), got, m.EFI.SHA256)
	}
	return &Image{Name: path.Base(m.Disk.ESP.BootPath), EFI: efi, M: m}, nil
}

// IPXEScript is an iPXE script that boots the image from base (the URL
// the Handler is served at, without a final slash). The same script works
// in BIOS iPXE (which boots the bzImage inside the EFI binary) and in UEFI
// iPXE (which starts the EFI binary).
func (im *Image) IPXEScript(base string) string {
	return fmt.Sprintf("#!ipxe\n# hotpath %s, EFI sha256 %s\nchain %s/%s\n", im.M.Architecture, im.M.EFI.SHA256, base, im.Name)
}

// Handler serves /<Name> (the EFI binary; Range requests work, which some
// firmware uses to resume) and /boot.ipxe. Everything else is 404.
func (im *Image) Handler() http.Handler {
	mux := http.NewServeMux()
	mod := time.Unix(im.M.SourceDateEpoch, 0)
	mux.HandleFunc("GET /"+im.Name, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/efi")
		w.Header().Set("ETag", `"`+im.M.EFI.SHA256+`"`)
		http.ServeContent(w, r, im.Name, mod, bytes.NewReader(im.EFI))
	})
	mux.HandleFunc("GET /boot.ipxe", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, im.IPXEScript("http://"+r.Host))
	})
	return mux
}

// WriteTFTP writes what a TFTP server's root needs for UEFI PXE boot (the
// EFI binary as the network boot program) and for iPXE (boot.ipxe, which
// fetches the binary over HTTP from httpBase: faster than TFTP for a
// binary of tens of MiB).
func (im *Image) WriteTFTP(dir, httpBase string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netboot: %w", err)
	}
	for name, data := range map[string][]byte{im.Name: im.EFI, "boot.ipxe": []byte(im.IPXEScript(httpBase))} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("netboot: %w", err)
		}
	}
	return nil
}
