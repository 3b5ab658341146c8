package main

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	goversion "github.com/hashicorp/go-version"
	sdkplugin "github.com/hashicorp/packer-plugin-sdk/plugin"
)

// checkInstall applies to the release files in dir the checks `packer
// init` makes when it installs version of the plugin source on goos/goarch
// from a GitHub release, in the order Packer makes them, and returns the
// first that fails. Each rule names the function of hashicorp/packer it
// comes from (packer/plugin-getter/plugins.go: Requirement.InstallLatest
// unless said otherwise; github/ is packer/plugin-getter/github/getter.go).
// Where Packer silently skips something (a malformed checksum line, a
// second file in the zip), this is stricter and calls it an error: a
// release must not depend on what Packer happens to tolerate.
//
// The binary's describe can only run for this machine's platform; for the
// others the names, checksums and zip are checked.
func checkInstall(dir, source, version, goos, goarch string) error {
	parts := strings.Split(source, "/")
	if len(parts) != 3 || parts[0] != "github.com" {
		// github/: NewGithubPlugin.
		return fmt.Errorf("source %q is not github.com/<namespace>/<name>", source)
	}
	name := strings.Replace(parts[2], "packer-plugin-", "", 1)
	// plugins.go: Requirement.FilenamePrefix.
	prefix := "packer-plugin-" + name + "_"

	// The tag: github/ Get("releases") lists the release repository's
	// tags, "refs/tags/" trimmed, each parsed by goversion.NewVersion; the
	// download path is GetOptions.Version, "v" + the parsed String().
	tag := "v" + version
	v, err := goversion.NewVersion(tag)
	if err != nil {
		return fmt.Errorf("tag %s: %v", tag, err)
	}
	if "v"+v.String() != tag {
		return fmt.Errorf("tag %s is not canonical: Packer would download from v%s", tag, v.String())
	}
	// checkVersion: a prerelease is never installed remotely.
	if v.Prerelease() != "" {
		return fmt.Errorf("version %s is a prerelease: PrereleaseInstallError", version)
	}

	// github/ Get("sha256"): <prefix>v<version>_SHA256SUMS from the tag.
	entries, err := readSums(filepath.Join(dir, prefix+tag+"_SHA256SUMS"))
	if err != nil {
		return err
	}
	var found *sumEntry
	for i := range entries {
		e := &entries[i]
		if filepath.Ext(e.file) == ".json" { // InstallLatest skips JSONExtension entries
			continue
		}
		if err := e.parse(prefix); err != nil {
			return err
		}
		// github/ Validate: the version, then the platform, then the API.
		if e.binVersion != tag {
			return fmt.Errorf("%s: wrong version: %s does not match expected %s", e.file, e.binVersion, tag)
		}
		if err := checkProtocol(e.protVersion); err != nil {
			return fmt.Errorf("%s: %v", e.file, err)
		}
		if e.os == goos && e.arch == goarch {
			if found != nil {
				return fmt.Errorf("two zips for %s/%s: %s and %s", goos, goarch, found.file, e.file)
			}
			found = e
		}
	}
	if found == nil {
		return fmt.Errorf("no zip for %s/%s in the SHA256SUMS: could not install any compatible version", goos, goarch)
	}
	return checkZip(dir, source, version, goos, goarch, found)
}

// sumEntry is one line of the SHA256SUMS file: plugins.go's
// ChecksumFileEntry, filled by github/ Init.
type sumEntry struct {
	sum, file                              string
	binVersion, protVersion, os, arch, ext string
}

// readSums reads a SHA256SUMS file as github/ TransformChecksumStream
// does: strings.Fields of each line, "checksum filename". Packer drops a
// line of any other shape; here it is an error.
func readSums(path string) ([]sumEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the checksum file Packer downloads: %w", err)
	}
	defer f.Close()
	var out []sumEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || len(fields[0]) != 64 {
			return nil, fmt.Errorf("%s: line %q is not <sha256> <file>", filepath.Base(path), sc.Text())
		}
		out = append(out, sumEntry{sum: fields[0], file: fields[1]})
	}
	return out, sc.Err()
}

// parse splits the file name as github/ Init does:
// <prefix>v<version>_x<api>_<os>_<arch>.zip. Packer needs at least four
// parts after the prefix and ignores more; here it must be exactly four.
func (e *sumEntry) parse(prefix string) error {
	if !strings.HasPrefix(e.file, prefix) {
		return fmt.Errorf("%s does not start with %s", e.file, prefix)
	}
	res := strings.TrimPrefix(e.file, prefix)
	e.ext = filepath.Ext(res)
	parts := strings.Split(strings.TrimSuffix(res, e.ext), "_")
	if len(parts) != 4 || e.ext != ".zip" {
		return fmt.Errorf("malformed filename %s, expected %s{version}_x{protocol-version}_{os}_{arch}.zip", e.file, prefix)
	}
	e.binVersion, e.protVersion, e.os, e.arch = parts[0], parts[1], parts[2], parts[3]
	return nil
}

// checkProtocol is BinaryInstallationOptions.CheckProtocolVersion against
// the API version of the SDK this plugin is built with (Packer passes its
// own, the same x5.0 since Packer 1.7): NewAPIVersion's parse, the same
// major, a minor no higher.
func checkProtocol(remote string) error {
	p := strings.Split(strings.TrimPrefix(remote, "x"), ".")
	if !strings.HasPrefix(remote, "x") || len(p) != 2 {
		return fmt.Errorf("invalid remote protocol %q", remote)
	}
	major, err1 := strconv.Atoi(p[0])
	minor, err2 := strconv.Atoi(p[1])
	localMajor, _ := strconv.Atoi(sdkplugin.APIVersionMajor)
	localMinor, _ := strconv.Atoi(sdkplugin.APIVersionMinor)
	switch {
	case err1 != nil || err2 != nil:
		return fmt.Errorf("invalid remote protocol %q", remote)
	case major != localMajor:
		return fmt.Errorf("unsupported remote protocol MAJOR version %d, Packer speaks %d", major, localMajor)
	case minor > localMinor:
		return fmt.Errorf("unsupported remote protocol MINOR version %d, Packer speaks up to %d", minor, localMinor)
	}
	return nil
}

// checkZip makes the download's checks: the zip's sha256
// (Checksummer.Checksum), the binary in it under the name Packer looks
// for (github/ ExpectedFileName, its extension swapped for the
// platform's: ".exe" on Windows), and, on this platform, the binary's
// describe (checkVersion, and ListInstallations when Packer loads it).
func checkZip(dir, source, version, goos, goarch string, e *sumEntry) error {
	zipPath := filepath.Join(dir, e.file)
	sum, err := fileSHA256(zipPath)
	if err != nil {
		return fmt.Errorf("the zip Packer downloads: %w", err)
	}
	if sum != e.sum {
		return fmt.Errorf("%s: checksums did not match: expected %s, got %s", e.file, e.sum, sum)
	}
	exe := ""
	if goos == "windows" {
		exe = ".exe"
	}
	want := strings.Join([]string{"packer-plugin-" + strings.Split(source, "/")[2], e.binVersion, e.protVersion, e.os, e.arch}, "_") + exe
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return fmt.Errorf("zip: %v", err)
	}
	defer zr.Close()
	if len(zr.File) != 1 || zr.File[0].Name != want {
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		return fmt.Errorf("%s holds %q; Packer looks for %q (and it should be alone)", e.file, names, want)
	}
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		return nil
	}
	return checkDescribe(zr.File[0], version, e.protVersion)
}

// checkDescribe extracts the binary and runs `describe` as
// GetPluginDescription does: checkVersion wants a semantic version whose
// core is the tag's and no prerelease; ListInstallations, when Packer
// later loads the installed plugin, wants the version equal to the one the
// name implies and the API version equal to the name's.
func checkDescribe(f *zip.File, version, prot string) error {
	rc, err := f.Open()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "packer-init-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, f.Name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(bin, "describe").Output()
	if err != nil {
		return fmt.Errorf("failed to describe plugin binary: %v", err)
	}
	var d describe
	if err := json.Unmarshal(out, &d); err != nil {
		return fmt.Errorf("describe %s: %v", out, err)
	}
	dv, err := goversion.NewSemver(d.Version)
	if err != nil {
		return fmt.Errorf("invalid self-reported version %q: %v", d.Version, err)
	}
	want := goversion.Must(goversion.NewVersion(version))
	switch {
	case dv.Core().Compare(want.Core()) != 0:
		return fmt.Errorf("binary reported version %q, expected %q", d.Version, version)
	case dv.Prerelease() != "":
		return fmt.Errorf("binary reported a pre-release version of %s", d.Version)
	case dv.Compare(want) != 0:
		return fmt.Errorf("binary reported version %q while its name implies %q", d.Version, version)
	case d.APIVersion != prot:
		return fmt.Errorf("binary reported API version %q while its name implies %q", d.APIVersion, prot)
	}
	return nil
}
