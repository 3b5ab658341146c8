// Command release builds the plugin's release files the way `packer init`
// downloads them from a GitHub release (the layout the
// packer-plugin-scaffolding GoReleaser configuration produces), into one
// directory:
//
//	packer-plugin-hotpath_v<version>_x5.0_<os>_<arch>[.exe]   the binaries
//	packer-plugin-hotpath_v<version>_x5.0_<os>_<arch>.zip     each zipped alone
//	packer-plugin-hotpath_v<version>_SHA256SUMS              sha256 of the zips
//	hotpath-init_v<version>_linux_{amd64,arm64}, hotpath-init_v<version>_SHA256SUMS
//
// Uploaded as the assets of a GitHub release tagged v<version> in
// github.com/hotpath-dev/packer-plugin-hotpath (.github/workflows/release.yml
// does it for a packer/v<version> tag of this repository), `packer init`
// installs the plugin from a required_plugins block with source
// "github.com/hotpath-dev/hotpath". Packer's GitHub getter
// (packer/plugin-getter/github/getter.go) reads only the SHA256SUMS file and
// the zip of the user's platform; no manifest.json is published, because
// only the getter for HashiCorp's own releases site reads one
// (packer/plugin-getter/release/getter.go, named without the v). A single
// binary installs with `packer plugins install --path`. The API version
// (x5.0) is read from the built plugin's describe answer, not assumed, and
// the version it reports must be the one asked for. The init binary is for
// building the image outside the hotpath tree (the builder's init_binary).
//
// Usage (in packer/): go run ./tools/release -version 0.1.0 [-out dist] [-targets linux/amd64,...]
package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hotpath-dev/hotpath/packer/builder/image"
)

const (
	plugin    = "packer-plugin-hotpath"
	pluginPkg = "./cmd/packer-plugin-hotpath"
	versionPk = "github.com/hotpath-dev/hotpath/packer/version"
)

// The platforms of the packer-plugin-scaffolding's .goreleaser.yml: every
// pair of these operating systems and architectures but the ignored ones,
// of which GoReleaser builds those the Go toolchain supports (`go tool
// dist list`: no solaris/386, no darwin/arm, no windows/arm since Go 1.25).
// hotpath-ami and hotpath-rollout work on all of them; hotpath-image
// builds the appliance on Linux only (kernel build), and says so elsewhere.
var (
	scaffoldingOSes   = []string{"netbsd", "solaris", "openbsd", "freebsd", "windows", "linux", "darwin"}
	scaffoldingArches = []string{"amd64", "386", "arm", "arm64"}
	scaffoldingIgnore = []string{"openbsd/arm64", "darwin/386"}
)

// Targets returns the scaffolding's platforms that are in dist (the
// lines of `go tool dist list`), sorted.
func Targets(dist []string) []string {
	var out []string
	for _, goos := range scaffoldingOSes {
		for _, goarch := range scaffoldingArches {
			t := goos + "/" + goarch
			if slices.Contains(dist, t) && !slices.Contains(scaffoldingIgnore, t) {
				out = append(out, t)
			}
		}
	}
	sort.Strings(out)
	return out
}

// distList is `go tool dist list`: the platforms this Go can build.
func distList() ([]string, error) {
	b, err := exec.Command("go", "tool", "dist", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("go tool dist list: %w", err)
	}
	return strings.Fields(string(b)), nil
}

// releaseVersionRE matches a version `packer init` installs from a GitHub
// release: no prerelease (packer/plugin-getter/plugins.go: checkVersion
// refuses one with a PrereleaseInstallError, and the binary must not
// describe itself as one either), no build metadata (ListInstallations
// ignores an installed binary whose name carries it) and no leading zeros
// (the tag is "v" + goversion's canonical String(), GetOptions.Version; a
// name that is not canonical is ignored by ListInstallations).
var releaseVersionRE = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// checkVersion says why version cannot be released, or nil.
func checkVersion(version string) error {
	if releaseVersionRE.MatchString(version) {
		return nil
	}
	why := "not major.minor.patch without leading zeros"
	switch {
	case strings.HasPrefix(version, "v"):
		why = "give it without the v (the tag and file names add it)"
	case strings.ContainsRune(version, '+'):
		why = "build metadata: Packer ignores installed plugins whose version carries it"
	case strings.ContainsRune(version, '-'):
		why = "a prerelease: packer init refuses to install one"
	}
	return fmt.Errorf("-version %q cannot be released: %s; e.g. 0.1.0", version, why)
}

func main() {
	version := flag.String("version", "", "release version, major.minor.patch without v (e.g. 0.1.0); no prerelease")
	out := flag.String("out", "dist", "output directory (must not exist)")
	targets := flag.String("targets", "", "comma-separated GOOS/GOARCH list; default: the platforms the packer-plugin-scaffolding releases")
	module := flag.String("module", ".", "the plugin's module (packer/)")
	initDir := flag.String("init", "..", "the hotpath module, whose ./init is released as hotpath-init")
	flag.Parse()
	var list []string
	if *targets != "" {
		list = strings.Split(*targets, ",")
	}
	if err := release(*version, *out, list, *module, *initDir, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// describe is the part of the plugin's describe answer checked here.
type describe struct {
	Version    string `json:"version"`
	APIVersion string `json:"api_version"`
}

// release writes the release files of version for targets (nil: Targets
// of this Go) into out, which must not exist.
func release(version, out string, targets []string, module, initDir string, log io.Writer) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	if targets == nil {
		dist, err := distList()
		if err != nil {
			return err
		}
		targets = Targets(dist)
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s exists; remove it first", out)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	// An empty prerelease: the SDK's version then is the bare version
	// (the package's default is "dev", which packer init refuses).
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.versionPrerelease= -X %s.versionMetadata=",
		versionPk, version, versionPk, versionPk)
	api, err := probeAPI(version, ldflags, out, module)
	if err != nil {
		return err
	}
	if err := releasePlugins(version, api, ldflags, out, targets, module, log); err != nil {
		return err
	}
	if initDir == "" {
		return nil
	}
	return releaseInits(version, out, initDir, log)
}

// probeAPI builds the plugin for this machine and returns the API version
// its describe answer reports (every file name carries it), after checking
// that it reports version.
func probeAPI(version, ldflags, out, module string) (string, error) {
	probe := filepath.Join(out, ".probe")
	if err := goBuild(runtime.GOOS+"/"+runtime.GOARCH, ldflags, probe, pluginPkg, module); err != nil {
		return "", err
	}
	raw, err := exec.Command(probe, "describe").Output()
	os.Remove(probe)
	if err != nil {
		return "", fmt.Errorf("%s describe: %w", plugin, err)
	}
	var d describe
	if err := json.Unmarshal(raw, &d); err != nil {
		return "", fmt.Errorf("%s describe: %w", plugin, err)
	}
	if d.Version != version || !strings.HasPrefix(d.APIVersion, "x") {
		return "", fmt.Errorf("the built plugin describes itself as version %q, API %q; want %q", d.Version, d.APIVersion, version)
	}
	return d.APIVersion, nil
}

// releasePlugins builds, zips and checksums the plugin for each target.
func releasePlugins(version, api, ldflags, out string, targets []string, module string, log io.Writer) error {
	sums := map[string]string{}
	for _, t := range targets {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(t), "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("target %q is not GOOS/GOARCH", t)
		}
		name := fmt.Sprintf("%s_v%s_%s_%s_%s", plugin, version, api, goos, goarch)
		bin := name
		if goos == "windows" {
			bin += ".exe"
		}
		fmt.Fprintf(log, "release: %s\n", bin)
		if err := goBuild(goos+"/"+goarch, ldflags, filepath.Join(out, bin), pluginPkg, module); err != nil {
			return err
		}
		sum, err := zipOne(filepath.Join(out, name+".zip"), filepath.Join(out, bin))
		if err != nil {
			return err
		}
		sums[name+".zip"] = sum
	}
	return writeSums(filepath.Join(out, fmt.Sprintf("%s_v%s_SHA256SUMS", plugin, version)), sums)
}

// releaseInits builds the init for init_binary: static linux, for each
// architecture the builder's architecture setting takes.
func releaseInits(version, out, initDir string, log io.Writer) error {
	sums := map[string]string{}
	for _, goarch := range image.Architectures {
		name := fmt.Sprintf("hotpath-init_v%s_linux_%s", version, goarch)
		abs := filepath.Join(out, name)
		fmt.Fprintf(log, "release: %s\n", name)
		if err := goBuild("linux/"+goarch, "-s -w", abs, "./init", initDir); err != nil {
			return err
		}
		sum, err := fileSHA256(abs)
		if err != nil {
			return err
		}
		sums[name] = sum
	}
	return writeSums(filepath.Join(out, fmt.Sprintf("hotpath-init_v%s_SHA256SUMS", version)), sums)
}

func goBuild(target, ldflags, out, pkg, dir string) error {
	goos, goarch, _ := strings.Cut(target, "/")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v\n%s", pkg, target, err, b)
	}
	return nil
}

// zipOne writes a zip holding only bin (executable, a fixed time so the
// same binary gives the same zip) and returns the zip's sha256.
func zipOne(path, bin string) (string, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	zw := zip.NewWriter(f)
	h := &zip.FileHeader{Name: filepath.Base(bin), Method: zip.Deflate, Modified: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("zip %s: %w", path, err)
	}
	return fileSHA256(path)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeSums writes "sha256  name" lines, sorted, as sha256sum does.
func writeSums(path string, sums map[string]string) error {
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
