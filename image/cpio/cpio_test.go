package cpio

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	ucpio "github.com/u-root/u-root/pkg/cpio"
)

func sample() []Entry {
	return []Entry{
		{Path: "/workload", Kind: File, Perm: 0o755, Data: []byte("workload-bytes")},
		{Path: "/etc/hotpath/init.conf", Kind: File, Perm: 0o644, Data: []byte("port=8080\n")},
		{Path: "/init", Kind: File, Perm: 0o755, Data: []byte("init-bytes!")},
		{Path: "/dev", Kind: Dir, Perm: 0o755},
		{Path: "/dev/console", Kind: CharDev, Perm: 0o600, Major: 5, Minor: 1},
		{Path: "/dev/null", Kind: CharDev, Perm: 0o666, Major: 1, Minor: 3},
		{Path: "/etc", Kind: Dir, Perm: 0o755},
		{Path: "/etc/hotpath", Kind: Dir, Perm: 0o755},
		{Path: "/tmp", Kind: Dir, Perm: 0o1777},
	}
}

func TestDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, sample(), Options{MTime: 1700000000}); err != nil {
		t.Fatal(err)
	}
	// Same entries in another order: same bytes.
	rev := sample()
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if err := Write(&b, rev, Options{MTime: 1700000000}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of the same entries differ")
	}
	var c bytes.Buffer
	if err := Write(&c, sample(), Options{MTime: 0}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Fatal("mtime does not reach the archive")
	}
}

func TestListing(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, sample(), Options{MTime: 42}); err != nil {
		t.Fatal(err)
	}
	recs, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, r := range recs {
		if r.UID != 0 || r.GID != 0 || r.MTime != 42 || r.Ino != uint64(i+1) {
			t.Errorf("%s: uid %d gid %d mtime %d ino %d", r.Name, r.UID, r.GID, r.MTime, r.Ino)
		}
		got = append(got, fmt.Sprintf("%s %o %d,%d %q", r.Name, r.Mode, r.Rmajor, r.Rminor, r.Data))
	}
	want := []string{
		`dev 40755 0,0 ""`,
		`dev/console 20600 5,1 ""`,
		`dev/null 20666 1,3 ""`,
		`etc 40755 0,0 ""`,
		`etc/hotpath 40755 0,0 ""`,
		`etc/hotpath/init.conf 100644 0,0 "port=8080\n"`,
		`init 100755 0,0 "init-bytes!"`,
		`tmp 41777 0,0 ""`,
		`workload 100755 0,0 "workload-bytes"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("listing:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.HasSuffix(bytes.TrimRight(buf.Bytes(), "\x00"), []byte(ucpio.Trailer)) {
		t.Error("archive does not end with the trailer")
	}

	// GNU cpio, when present, must agree that this is a valid newc archive.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-t", "--quiet")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("cpio -t: %v", err)
		}
		names := strings.Fields(string(out))
		if len(names) != len(want) || names[0] != "dev" || names[len(names)-1] != "workload" {
			t.Errorf("cpio -t lists %q", names)
		}
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		es   []Entry
		want string
	}{
		{"relative", []Entry{{Path: "init", Kind: File}}, "not absolute"},
		{"unclean", []Entry{{Path: "/a/../init", Kind: File}}, "not clean"},
		{"duplicate", []Entry{{Path: "/init", Kind: File}, {Path: "/init", Kind: File}}, "duplicate"},
		{"orphan", []Entry{{Path: "/etc/x", Kind: File}}, `parent directory "etc"`},
		{"parent is a file", []Entry{{Path: "/etc", Kind: File}, {Path: "/etc/x", Kind: File}}, `parent directory "etc"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tc.es, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
