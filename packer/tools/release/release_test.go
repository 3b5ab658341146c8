package main

import (
	"archive/zip"
	"bufio"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The release for this machine's platform: the names, the zip, the
// checksums and the manifest Packer's installer reads, and a binary that
// describes itself with the released version.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the plugin twice")
	}
	out := filepath.Join(t.TempDir(), "dist")
	host := runtime.GOOS + "/" + runtime.GOARCH
	if err := release("0.2.0", out, []string{host}, "../..", "../../..", io.Discard); err != nil {
		t.Fatal(err)
	}
	name := "packer-plugin-hotpath_v0.2.0_x5.0_" + runtime.GOOS + "_" + runtime.GOARCH
	entries, _ := os.ReadDir(out)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"hotpath-init_v0.2.0_SHA256SUMS", "hotpath-init_v0.2.0_linux_amd64", "hotpath-init_v0.2.0_linux_arm64",
		"packer-plugin-hotpath_v0.2.0_SHA256SUMS", "packer-plugin-hotpath_v0.2.0_manifest.json", name, name + ".zip"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", got, want)
	}

	// One init per builder architecture, each an executable for it.
	for goarch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		ef, err := elf.Open(filepath.Join(out, "hotpath-init_v0.2.0_linux_"+goarch))
		if err != nil {
			t.Fatal(err)
		}
		if ef.Machine != machine || ef.Type != elf.ET_EXEC {
			t.Errorf("%s init: %v %v, want a %v executable", goarch, ef.Machine, ef.Type, machine)
		}
		ef.Close()
	}

	// The checksum file names the zip, as Packer's GitHub getter parses
	// it: <prefix>_v<version>_x<api>_<os>_<arch>.zip.
	f, _ := os.Open(filepath.Join(out, "packer-plugin-hotpath_v0.2.0_SHA256SUMS"))
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sum, err := fileSHA256(filepath.Join(out, fields[1]))
		if len(fields) != 2 || err != nil || sum != fields[0] {
			t.Errorf("SHA256SUMS line %q: file sha256 %s (%v)", sc.Text(), sum, err)
		}
		parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(fields[1], "packer-plugin-hotpath_"), ".zip"), "_")
		if len(parts) != 4 || parts[0] != "v0.2.0" || parts[1] != "x5.0" || parts[2] != runtime.GOOS || parts[3] != runtime.GOARCH {
			t.Errorf("zip name %s parses as %v", fields[1], parts)
		}
		lines++
	}
	f.Close()
	if lines != 1 {
		t.Errorf("%d checksum lines", lines)
	}

	var m struct {
		Version  string
		Metadata struct {
			ProtocolVersion string `json:"protocol_version"`
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "packer-plugin-hotpath_v0.2.0_manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil || m.Version != "1" || m.Metadata.ProtocolVersion != "5.0" {
		t.Errorf("manifest %s (%v)", b, err)
	}

	// The zip holds the binary alone, executable, and it is the plugin at
	// the released version.
	zr, err := zip.OpenReader(filepath.Join(out, name+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 1 || zr.File[0].Name != name || zr.File[0].Mode()&0o111 == 0 {
		t.Fatalf("zip holds %v", zr.File)
	}
	rc, _ := zr.File[0].Open()
	bin := filepath.Join(t.TempDir(), name)
	data, _ := io.ReadAll(rc)
	rc.Close()
	os.WriteFile(bin, data, 0o755)
	desc, err := exec.Command(bin, "describe").Output()
	if err != nil {
		t.Fatal(err)
	}
	var d describe
	if json.Unmarshal(desc, &d); d.Version != "0.2.0" || d.APIVersion != "x5.0" {
		t.Errorf("describe %s", desc)
	}

	if err := release("v1", filepath.Join(t.TempDir(), "x"), []string{host}, "../..", "", io.Discard); err == nil {
		t.Error("a version with a v prefix was accepted")
	}
	if err := release("0.2.0", out, []string{host}, "../..", "", io.Discard); err == nil {
		t.Error("an existing output directory was reused")
	}
}
