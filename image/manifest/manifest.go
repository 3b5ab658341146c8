// Package manifest describes a built appliance image: what went in (every
// input's hash) and what came out (the EFI binary's and the disk's hash and
// size). It is written next to the disk as manifest.json.
//
// A manifest is a function of the inputs only: no wall-clock time, no
// host name, no absolute path, no value that depends on the host's file
// system (such as the disk's allocated size). Two builds of the same inputs
// give byte-identical manifests, so comparing two manifests (or their
// hashes) compares two builds.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Format names this layout; it changes when a field changes meaning.
const Format = "hotpath-image-manifest/v1"

// Manifest is the content of manifest.json.
type Manifest struct {
	Format string `json:"format"`
	// Architecture is the GOARCH of the kernel and the programs: "amd64"
	// or "arm64" (what an AMI's Architecture is registered as).
	Architecture    string    `json:"architecture"`
	SourceDateEpoch int64     `json:"source_date_epoch"`
	Disk            Disk      `json:"disk"`
	EFI             Blob      `json:"efi"`
	Kernel          Kernel    `json:"kernel"`
	Initramfs       Initramfs `json:"initramfs"`
	Init            Program   `json:"init"`
	Workload        Program   `json:"workload"`
	InitConfig      Config    `json:"init_config"`
	Go              Toolchain `json:"go"`
	// Signature is set when the EFI binary is signed for UEFI Secure Boot;
	// EFI then describes the signed binary.
	Signature *Signature `json:"signature,omitempty"`
	// Measurements are the reference PCR values a TPM holds once the
	// firmware has started the EFI binary (package image/pcr), in PCR
	// order.
	Measurements []Measurement `json:"measurements,omitempty"`
	// Firmware are the files hotpath-image build -firmware put under
	// /lib/firmware (also in Initramfs.Entries); none without it.
	Firmware []Entry `json:"firmware,omitempty"`
}

// Signature describes the EFI binary's Authenticode signature. The key
// itself is never recorded.
type Signature struct {
	Format string `json:"format"` // "authenticode-pkcs7-sha256"
	// CertSHA256 is the signer certificate's SHA-256 fingerprint (of its
	// DER), the value db must hold or chain to.
	CertSHA256 string `json:"cert_sha256"`
	Subject    string `json:"subject"`
	// UnsignedSHA256 is the binary's hash before signing.
	UnsignedSHA256 string `json:"unsigned_sha256"`
}

// Measurement is one PCR's reference value in each bank (lower-case hex).
type Measurement struct {
	PCR    int    `json:"pcr"`
	SHA256 string `json:"sha256"`
	SHA384 string `json:"sha384"`
	// What says what is measured into it, for a reader.
	What string `json:"what"`
}

// Blob is a file's identity.
type Blob struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Disk describes the raw disk image.
type Disk struct {
	File           string `json:"file"` // base name, e.g. hotpath.img
	SHA256         string `json:"sha256"`
	Size           int64  `json:"size"` // virtual size in bytes
	PartitionTable string `json:"partition_table"`
	DiskGUID       string `json:"disk_guid"`
	ESP            ESP    `json:"esp"`
	// BIOSBoot is the legacy BIOS boot code; nil for a disk that boots
	// UEFI only (every arm64 disk).
	BIOSBoot *BIOSBoot `json:"bios_boot,omitempty"`
}

// BIOSBoot describes the BIOS boot partition and the loader in it and in
// the MBR (see image/bios): which Debian package, which version, and the
// hashes of what was read and what was written.
type BIOSBoot struct {
	Index    int    `json:"index"`
	TypeGUID string `json:"type_guid"`
	GUID     string `json:"guid"`
	Start    int64  `json:"start"` // bytes from the start of the disk
	Size     int64  `json:"size"`
	// Loader names the boot code, e.g. "grub i386-pc".
	Loader         string   `json:"loader"`
	Package        string   `json:"package"` // e.g. grub-pc-bin
	Version        string   `json:"version"`
	MkimageVersion string   `json:"mkimage_version"` // grub-common's, which made the core image
	Modules        []string `json:"modules"`
	Config         string   `json:"config"` // built into the core image
	// BootImgSHA256 and CoreImgSHA256 are boot.img as installed and the
	// core image as grub-mkimage made it; MBRCodeSHA256 and CoreSHA256
	// are the same after patching, as written on the disk.
	BootImgSHA256 string `json:"boot_img_sha256"`
	CoreImgSHA256 string `json:"core_img_sha256"`
	MBRCodeSHA256 string `json:"mbr_code_sha256"`
	CoreSHA256    string `json:"core_sha256"`
}

// BootsBIOS says whether the disk boots legacy BIOS as well as UEFI.
func (m *Manifest) BootsBIOS() bool { return m.Disk.BIOSBoot != nil }

// ESP describes the EFI system partition.
type ESP struct {
	Index       int    `json:"index"`
	TypeGUID    string `json:"type_guid"`
	GUID        string `json:"guid"`
	Start       int64  `json:"start"` // bytes from the start of the disk
	Size        int64  `json:"size"`
	FileSystem  string `json:"file_system"`
	VolumeID    string `json:"volume_id"`
	BootPath    string `json:"boot_path"`
	BootPathOff int64  `json:"boot_file_offset"` // where the loader's bytes start on the disk
}

// Kernel describes the kernel built with kernel-config.
type Kernel struct {
	Version      string `json:"version"`
	SourceID     string `json:"source_id"`
	ConfigSHA256 string `json:"config_sha256"` // merged config, before initramfs/cmdline
	Compiler     string `json:"compiler"`
	Key          string `json:"key"`
	Cmdline      string `json:"cmdline"` // the full built-in command line
}

// Initramfs lists the archive built into the kernel.
type Initramfs struct {
	SHA256  string  `json:"sha256"`
	Size    int64   `json:"size"`
	Format  string  `json:"format"`
	Entries []Entry `json:"entries"`
}

// Entry is one member of the initramfs.
type Entry struct {
	Path   string `json:"path"`
	Mode   string `json:"mode"` // octal, with type bits, e.g. 100755
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Device string `json:"device,omitempty"` // "major,minor" of a device node
}

// Program is the init or the workload.
type Program struct {
	// Package is the Go import path built, or empty for a prebuilt binary.
	Package string `json:"package,omitempty"`
	// SourceSHA256 hashes the package's non-standard-library sources (see
	// gobuild.Source).
	SourceSHA256 string   `json:"source_sha256,omitempty"`
	SourceFiles  int      `json:"source_files,omitempty"`
	Modules      []string `json:"modules,omitempty"`
	// Binary names a prebuilt binary (base name only).
	Binary string `json:"binary,omitempty"`
	Path   string `json:"path"` // inside the initramfs
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Config is the init configuration baked at /etc/hotpath/init.conf.
type Config struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Text   string `json:"text"`
	// Effective is every key's value after the file and the kernel command
	// line's hotpath.* overrides, as the init will see it at boot.
	Effective map[string]string `json:"effective"`
}

// Toolchain is the Go toolchain the binaries were built with.
type Toolchain struct {
	Version  string `json:"version"`
	Compiler string `json:"compiler"`
	GOAMD64  string `json:"goamd64,omitempty"`
	GOARM64  string `json:"goarm64,omitempty"`
	Flags    string `json:"flags"`
	Env      string `json:"env"`
	// GOFLAGS and GOEXPERIMENT as the go command resolved them (from the
	// environment or `go env -w`): both change the binaries.
	GOFLAGS      string `json:"goflags"`
	GOEXPERIMENT string `json:"goexperiment"`
}

// Marshal returns the manifest as indented JSON with a final newline. Map
// keys are sorted by encoding/json, so the bytes are stable.
func (m *Manifest) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteFile writes the manifest to name atomically.
func (m *Manifest) WriteFile(name string) error {
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// Read decodes a manifest, refusing unknown fields and other formats.
func Read(r io.Reader) (*Manifest, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("manifest: format %q, want %q", m.Format, Format)
	}
	return &m, nil
}

// ReadFile reads the manifest at name.
func ReadFile(name string) (*Manifest, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	return Read(f)
}
