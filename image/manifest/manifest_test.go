package manifest

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *Manifest {
	return &Manifest{
		Format: Format,
		Disk:   Disk{File: "hotpath.img", SHA256: "ab", Size: 1 << 30, PartitionTable: "gpt"},
		InitConfig: Config{
			Path: "/etc/hotpath/init.conf", Text: "a=<b>&\n",
			Effective: map[string]string{"z": "1", "a": "2", "m": "3"},
		},
	}
}

func TestStableRoundTrip(t *testing.T) {
	a, err := sample().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // map order must not leak into the bytes
		b, _ := sample().Marshal()
		if !bytes.Equal(a, b) {
			t.Fatal("two marshals differ")
		}
	}
	if !bytes.HasSuffix(a, []byte("}\n")) || !bytes.Contains(a, []byte(`"text": "a=<b>&\n"`)) {
		t.Errorf("unexpected encoding:\n%s", a)
	}
	if i, j := bytes.Index(a, []byte(`"a": "2"`)), bytes.Index(a, []byte(`"z": "1"`)); i < 0 || j < i {
		t.Error("map keys not sorted")
	}
	name := filepath.Join(t.TempDir(), "manifest.json")
	if err := sample().WriteFile(name); err != nil {
		t.Fatal(err)
	}
	m, err := ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if m.Disk.Size != 1<<30 || m.InitConfig.Effective["m"] != "3" {
		t.Errorf("read back %+v", m)
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"format":"other"}`, "format"},
		{`{"format":"` + Format + `","surprise":1}`, "unknown field"},
		{`{`, "unexpected EOF"},
	} {
		if _, err := Read(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}
