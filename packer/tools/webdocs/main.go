// Command webdocs renders the plugin's documentation (docs/) into
// .web-docs/, the layout the Packer integrations index reads from a
// plugin's release repository, with the SDK's own tools (packer-sdc,
// pinned in go.mod):
//
//  1. packer-sdc struct-markdown turns the configuration structs' doc
//     comments (builder/image, postprocessor/ami, postprocessor/rollout
//     config.go) into partials, so the option lists are the code's;
//  2. packer-sdc renderdocs replaces docs/'s @include lines with them;
//  3. each rendered component page docs/<kind>s/<name>.mdx becomes
//     .web-docs/components/<kind>/<name>/README.md without its front matter
//     and title (the index adds both), docs/README.md .web-docs/README.md.
//
// .web-docs/metadata.hcl, the integration's description, is written by
// hand and left alone. With -check nothing is written: it fails when the
// committed .web-docs differ from a fresh render (make packer-generate-check).
//
// Usage (in packer/): go run ./tools/webdocs [-check]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// configFiles hold the structs whose comments document the options.
var configFiles = []string{"builder/image/config.go", "postprocessor/ami/config.go", "postprocessor/rollout/config.go"}

// kinds maps docs/'s folders to the integration's component kinds.
var kinds = map[string]string{"builders": "builder", "post-processors": "post-processor",
	"provisioners": "provisioner", "datasources": "data-source"}

func main() {
	check := flag.Bool("check", false, "compare .web-docs with a fresh render instead of writing it")
	flag.Parse()
	if err := run(".", *check); err != nil {
		fmt.Fprintln(os.Stderr, "webdocs:", err)
		os.Exit(1)
	}
}

func run(module string, check bool) error {
	tmp, err := os.MkdirTemp("", "webdocs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	partials, err := structMarkdown(module, tmp)
	if err != nil {
		return err
	}
	rendered := filepath.Join(tmp, "rendered")
	if err := sdc(module, "renderdocs", "-src", filepath.Join(module, "docs"), "-partials", partials, "-dst", rendered); err != nil {
		return err
	}
	files, err := compile(rendered)
	if err != nil {
		return err
	}
	dst := filepath.Join(module, ".web-docs")
	if check {
		return compare(dst, files)
	}
	return write(dst, files)
}

// structMarkdown writes the partials of configFiles under dir and returns
// their folder. struct-markdown finds the project by a parent folder named
// packer-plugin-*, which this module's folder (packer/) is not, so the
// files are copied into one.
func structMarkdown(module, dir string) (string, error) {
	root := filepath.Join(dir, "packer-plugin-hotpath")
	for _, f := range configFiles {
		b, err := os.ReadFile(filepath.Join(module, f))
		if err != nil {
			return "", err
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
		if err := sdc(module, "struct-markdown", dst); err != nil {
			return "", err
		}
	}
	return filepath.Join(root, "docs-partials"), nil
}

// sdc runs the packer-sdc pinned in go.mod (go tool) in module, its path
// arguments made absolute.
func sdc(module string, args ...string) error {
	abs := slices.Clone(args)
	for i, a := range abs[1:] {
		if p, err := filepath.Abs(a); err == nil && !strings.HasPrefix(a, "-") {
			abs[i+1] = p
		}
	}
	cmd := exec.Command("go", append([]string{"tool", "packer-sdc"}, abs...)...)
	cmd.Dir = module
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("packer-sdc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// compile maps the rendered docs to the .web-docs files: path -> content.
func compile(rendered string) (map[string][]byte, error) {
	files := map[string][]byte{}
	readme, err := os.ReadFile(filepath.Join(rendered, "README.md"))
	if err != nil {
		return nil, fmt.Errorf("docs/README.md: %w", err)
	}
	files["README.md"] = readme
	err = filepath.WalkDir(rendered, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".mdx" {
			return err
		}
		rel, _ := filepath.Rel(rendered, path)
		folder, name := filepath.Split(rel)
		kind, ok := kinds[strings.TrimSuffix(folder, "/")]
		if !ok {
			return fmt.Errorf("docs/%s: components go in %s", rel, strings.Join(sortedKeys(kinds), ", "))
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		body, err := stripHeader(b)
		if err != nil {
			return fmt.Errorf("docs/%s: %w", rel, err)
		}
		files[filepath.Join("components", kind, strings.TrimSuffix(name, ".mdx"), "README.md")] = body
		return nil
	})
	return files, err
}

// stripHeader removes the front matter (--- ... ---) and the "# Title"
// line after it, which the integrations index renders itself.
func stripHeader(b []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(b, []byte("---\n"))
	if !ok {
		return nil, errors.New("no front matter")
	}
	_, rest, ok = bytes.Cut(rest, []byte("\n---\n"))
	if !ok {
		return nil, errors.New("front matter not closed")
	}
	rest = bytes.TrimLeft(rest, "\n")
	if bytes.HasPrefix(rest, []byte("# ")) {
		if _, after, ok := bytes.Cut(rest, []byte("\n")); ok {
			rest = bytes.TrimLeft(after, "\n")
		}
	}
	return rest, nil
}

// compare lists every generated file of dst (all but metadata.hcl) that
// differs from files, is missing or is extra.
func compare(dst string, files map[string][]byte) error {
	var stale []string
	seen := map[string]bool{}
	err := filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dst, path)
		if rel == "metadata.hcl" {
			return nil
		}
		seen[rel] = true
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if want, ok := files[rel]; !ok {
			stale = append(stale, rel+" (no longer generated)")
		} else if !bytes.Equal(b, want) {
			stale = append(stale, rel+" (differs)")
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for rel := range files {
		if !seen[rel] {
			stale = append(stale, rel+" (missing)")
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		return fmt.Errorf(".web-docs is stale, run `go run ./tools/webdocs` in packer/ and commit it:\n  %s", strings.Join(stale, "\n  "))
	}
	return nil
}

// write replaces the generated files of dst with files.
func write(dst string, files map[string][]byte) error {
	if err := os.RemoveAll(filepath.Join(dst, "components")); err != nil {
		return err
	}
	for rel, b := range files {
		path := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
