// Command release builds the plugin's release files the way Packer's
// installer expects them (the layout of the packer-plugin-scaffolding
// GoReleaser configuration), into one directory:
//
//	packer-plugin-hotpath_v<version>_x5.0_<os>_<arch>[.exe]   the binaries
//	packer-plugin-hotpath_v<version>_x5.0_<os>_<arch>.zip     each zipped alone
//	packer-plugin-hotpath_v<version>_SHA256SUMS              sha256 of the zips
//	packer-plugin-hotpath_v<version>_manifest.json           protocol version
//	hotpath-init_v<version>_linux_{amd64,arm64}, hotpath-init_v<version>_SHA256SUMS
//
// Uploaded as the assets of a GitHub release tagged v<version> in
// github.com/hotpath-dev/packer-plugin-hotpath, `packer init` installs
// the plugin from a required_plugins block with source
// "github.com/hotpath-dev/hotpath"; a single binary installs with
// `packer plugins install --path`. The API version (x5.0) is read from the
// built plugin's describe answer, not assumed, and the version it reports
// must be the one asked for. The init binary is for building the image
// outside the hotpath tree (the builder's init_binary).
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

// DefaultTargets are the platforms released. hotpath-ami and
// hotpath-rollout work on all of them; hotpath-image builds the appliance
// on Linux only (kernel build, static Go binaries for linux/amd64 or
// linux/arm64).
var DefaultTargets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

var semverRE = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

func main() {
	version := flag.String("version", "", "release version, semver without v (e.g. 0.1.0)")
	out := flag.String("out", "dist", "output directory (must not exist)")
	targets := flag.String("targets", strings.Join(DefaultTargets, ","), "comma-separated GOOS/GOARCH list")
	module := flag.String("module", ".", "the plugin's module (packer/)")
	initDir := flag.String("init", "..", "the hotpath module, whose ./init is released as hotpath-init")
	flag.Parse()
	if err := release(*version, *out, strings.Split(*targets, ","), *module, *initDir, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// describe is the part of the plugin's describe answer checked here.
type describe struct {
	Version    string `json:"version"`
	APIVersion string `json:"api_version"`
}

func release(version, out string, targets []string, module, initDir string, log io.Writer) error {
	if !semverRE.MatchString(version) {
		return fmt.Errorf("-version %q is not a semantic version like 0.1.0", version)
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
	pre, meta := "", ""
	core := version
	if i := strings.IndexByte(core, '-'); i >= 0 {
		core, pre = version[:i], version[i+1:]
	}
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.versionPrerelease=%s -X %s.versionMetadata=%s",
		versionPk, core, versionPk, pre, versionPk, meta)

	// The host build first: its describe answer gives the API version
	// every file name carries.
	host := runtime.GOOS + "/" + runtime.GOARCH
	probe := filepath.Join(out, ".probe")
	if err := goBuild(host, ldflags, probe, pluginPkg, module); err != nil {
		return err
	}
	raw, err := exec.Command(probe, "describe").Output()
	os.Remove(probe)
	if err != nil {
		return fmt.Errorf("%s describe: %w", plugin, err)
	}
	var d describe
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%s describe: %w", plugin, err)
	}
	if d.Version != version || !strings.HasPrefix(d.APIVersion, "x") {
		return fmt.Errorf("the built plugin describes itself as version %q, API %q; want %q", d.Version, d.APIVersion, version)
	}
	api := d.APIVersion

	sums := map[string]string{}
	for _, t := range targets {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(t), "/")
		if !ok {
			return fmt.Errorf("target %q is not GOOS/GOARCH", t)
		}
		name := fmt.Sprintf("%s_v%s_%s_%s_%s", plugin, version, api, goos, goarch)
		bin := name
		if goos == "windows" {
			bin += ".exe"
		}
		fmt.Fprintf(log, "release: %s\n", bin)
		if err := goBuild(t, ldflags, filepath.Join(out, bin), pluginPkg, module); err != nil {
			return err
		}
		sum, err := zipOne(filepath.Join(out, name+".zip"), filepath.Join(out, bin))
		if err != nil {
			return err
		}
		sums[name+".zip"] = sum
	}
	if err := writeSums(filepath.Join(out, fmt.Sprintf("%s_v%s_SHA256SUMS", plugin, version)), sums); err != nil {
		return err
	}
	manifest := map[string]any{"version": "1", "metadata": map[string]string{"protocol_version": strings.TrimPrefix(api, "x")}}
	b, _ := json.MarshalIndent(manifest, "", "  ")
	if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("%s_v%s_manifest.json", plugin, version)), append(b, '\n'), 0o644); err != nil {
		return err
	}

	// The init, for init_binary: static linux, for each architecture the
	// builder's architecture setting takes.
	if initDir != "" {
		sums := map[string]string{}
		for _, goarch := range image.Architectures { // one init per builder architecture
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
		if err := writeSums(filepath.Join(out, fmt.Sprintf("hotpath-init_v%s_SHA256SUMS", version)), sums); err != nil {
			return err
		}
	}
	return nil
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
