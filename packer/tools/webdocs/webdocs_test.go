package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStripHeader(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"---\npage_title: x\n---\n\n# hotpath-image\n\nType: `hotpath-image`\n", "Type: `hotpath-image`\n", ""},
		{"---\na: b\n---\nbody\n", "body\n", ""},
		{"# no front matter\n", "", "no front matter"},
		{"---\na: b\n", "", "not closed"},
	} {
		got, err := stripHeader([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("stripHeader(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("stripHeader(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// Rendered docs map onto the integrations layout, and a page outside the
// component folders is refused.
func TestCompile(t *testing.T) {
	dir := t.TempDir()
	page := "---\nx: y\n---\n\n# T\n\nbody\n"
	for name, content := range map[string]string{
		"README.md":                   "readme\n",
		"builders/image.mdx":          page,
		"post-processors/rollout.mdx": page,
	} {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := compile(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"README.md": "readme\n", "components/builder/image/README.md": "body\n",
		"components/post-processor/rollout/README.md": "body\n"}
	if len(files) != len(want) {
		t.Errorf("files %v, want %v", files, want)
	}
	for k, v := range want {
		if string(files[k]) != v {
			t.Errorf("%s = %q, want %q", k, files[k], v)
		}
	}
	os.WriteFile(filepath.Join(dir, "guides.mdx"), []byte(page), 0o644)
	if _, err := compile(dir); err == nil {
		t.Error("a page outside the component folders was compiled")
	}
}
