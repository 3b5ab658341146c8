package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/init/report"
)

// TestPcrsCmd reads the binary back from a disk's ESP and prints the
// reference values the builder computes from the bytes it wrote.
func TestPcrsCmd(t *testing.T) {
	efi := authenticodetest.PE([]byte("appliance"), nil)
	p := filepath.Join(t.TempDir(), "hotpath.img")
	seed := []byte("pcrs")
	if _, err := disk.Write(p, efi, disk.Options{DiskGUID: disk.DeriveGUID(seed, "d"), PartGUID: disk.DeriveGUID(seed, "p"), VolumeID: 1}); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if err := pcrsCmd([]string{p}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	ms, err := image.Measurements(efi)
	if err != nil {
		t.Fatal(err)
	}
	// PCR 4 and PCR 12 (the usage says why these two), each printed once
	// with both banks' values.
	var pcrs []int
	for _, m := range ms {
		pcrs = append(pcrs, m.PCR)
		if !strings.Contains(out.String(), m.SHA256) || !strings.Contains(out.String(), m.SHA384) {
			t.Errorf("pcr%d not in the output:\n%s", m.PCR, out.String())
		}
	}
	if !slices.Equal(pcrs, []int{4, 12}) || strings.Count(out.String(), "sha256 ") != 2 || strings.Count(out.String(), "sha384 ") != 2 {
		t.Errorf("PCRs %v, want 4 and 12, each printed once:\n%s", pcrs, out.String())
	}
	if !strings.Contains(out.String(), "unsigned") {
		t.Errorf("output does not say the binary is unsigned:\n%s", out.String())
	}
	if err := pcrsCmd([]string{filepath.Join(t.TempDir(), "none.img")}, &out, &errOut); err == nil {
		t.Error("a missing disk was read")
	}
}

// TestReportManifest: report -manifest fails a boot whose TPM does not
// hold the manifest's values and passes one whose TPM does.
func TestReportManifest(t *testing.T) {
	dir := t.TempDir()
	m := &manifest.Manifest{Format: manifest.Format, Measurements: []manifest.Measurement{{PCR: 4, SHA256: "aa", SHA384: "bb"}}}
	mp := filepath.Join(dir, "manifest.json")
	if err := m.WriteFile(mp); err != nil {
		t.Fatal(err)
	}
	logWith := func(sha384 string) string {
		line, err := report.Format(report.ReportPrefix, report.Report{Version: report.Version, ReadyMillis: 1, Steps: []report.Step{
			{Name: "tpm", Status: report.Applied, Detail: map[string]string{"pcr4.sha256": "aa", "pcr4.sha384": sha384}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("console-%s.log", sha384))
		os.WriteFile(p, line, 0o644)
		return p
	}
	var out, errOut strings.Builder
	if err := reportCmd([]string{"-manifest", mp, logWith("bb")}, nil, &out, &errOut); err != nil {
		t.Errorf("matching PCRs: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := reportCmd([]string{"-manifest", mp, logWith("cc")}, nil, &out, &errOut); err != errFailed {
		t.Errorf("another PCR 4: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "FAIL pcr4 sha384") {
		t.Errorf("output:\n%s", out.String())
	}
}
