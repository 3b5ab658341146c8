package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// TestPGOProfile checks that the workload is built with its profile
// (default.pgo, which go build and go test use by themselves) and that the
// profile still names the request path's hot functions: after a rename
// it would silently stop guiding the compiler (make pgo regenerates it).
func TestPGOProfile(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info")
	}
	pgo := ""
	for _, s := range bi.Settings {
		if s.Key == "-pgo" {
			pgo = s.Value
		}
	}
	if !strings.HasSuffix(pgo, "default.pgo") {
		t.Errorf("built with -pgo=%q, want default.pgo", pgo)
	}
	f, err := os.Open("default.pgo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f) // a pprof profile: gzipped protobuf, names in its string table
	if err != nil {
		t.Fatal(err)
	}
	p, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{
		"github.com/hotpath-dev/hotpath/server.(*worker).loop",
		"github.com/hotpath-dev/hotpath/server.(*worker).read",
		"github.com/hotpath-dev/hotpath/server.(*worker).respond",
		"github.com/hotpath-dev/hotpath/server.(*worker).serve",
		"github.com/hotpath-dev/hotpath/server.(*worker).appendResponse",
		"github.com/hotpath-dev/hotpath/server/http1.parse",
		"github.com/hotpath-dev/hotpath/server/http1.(*Request).fastRequestLine",
	} {
		if !bytes.Contains(p, []byte(fn)) {
			t.Errorf("default.pgo does not name %s: regenerate it (make pgo)", fn)
		}
	}
}
