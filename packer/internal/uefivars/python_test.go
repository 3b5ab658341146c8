package uefivars_test

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
)

// pythonUefivars returns the uefivars command of awslabs' python-uefivars
// (pip's uefivars: not a Debian package, and PyPI is out of the
// project's reach) and a python3 that imports its pyuefivars module, or
// skips the test saying which is missing.
func pythonUefivars(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("uefivars")
	if err != nil {
		t.Skip("python-uefivars is not installed (no uefivars command on PATH; it comes from PyPI): no cross-check against AWS's own tool")
	}
	if out, err := exec.Command("python3", "-c", "import pyuefivars.aws_v0").CombinedOutput(); err != nil {
		t.Skipf("python3 cannot import pyuefivars (%v: %s): no cross-check against AWS's own tool", err, out)
	}
	return bin
}

// pyVar is a variable in python-uefivars' JSON (format version 2: bytes
// in hex, the GUID as text).
type pyVar struct {
	Name      string `json:"name"`
	Data      string `json:"data"`
	GUID      string `json:"guid"`
	Attr      uint32 `json:"attr"`
	Timestamp string `json:"timestamp,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

// TestPythonUefivars: for the same variables python-uefivars writes the
// same decompressed payload as Encode (both the layout's), and reads
// Encode's store back to the same variables, the empty digest and time
// stamp as none.
func TestPythonUefivars(t *testing.T) {
	bin := pythonUefivars(t)
	dir := t.TempDir()
	vars, want := layoutVars()
	guids := map[[16]byte]string{efiGlobal: "8be4df61-93ca-11d2-aa0d-00e098032b8c", efiImageSecurityDatabase: "d719b2cb-3d3a-4596-a3bc-dad00e67656f"}
	var in []pyVar
	for _, v := range vars {
		pv := pyVar{Name: v.Name, Data: hex.EncodeToString(v.Data), GUID: guids[v.GUID], Attr: v.Attrs}
		if v.Time != ([16]byte{}) {
			pv.Timestamp = hex.EncodeToString(v.Time[:])
		}
		if v.Digest != nil {
			pv.Digest = hex.EncodeToString(v.Digest)
		}
		in = append(in, pv)
	}
	js, _ := json.Marshal(map[string]any{"version": 2, "variables": in})
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(name string, args ...string) []byte {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("%s %v: %v\n%s", name, args, err, ee.Stderr)
			}
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return out
	}

	// python-uefivars' store of the variables, inflated with its preset
	// dictionary (which this package does not ship).
	pyStore := filepath.Join(dir, "python.aws")
	run(bin, "-i", "json", "-I", write("vars.json", js), "-o", "aws", "-O", pyStore)
	pyPayload := run("python3", "-c", `import sys, base64, zlib
from pyuefivars.aws_v0 import UEFIVarStoreV0
raw = base64.b64decode(open(sys.argv[1], "rb").read())
sys.stdout.buffer.write(zlib.decompressobj(0, zdict=UEFIVarStoreV0.dict).decompress(raw[16:]))`, pyStore)
	raw, _ := os.ReadFile(pyStore)
	if _, err := uefivars.Decode(string(raw)); !errors.Is(err, uefivars.ErrPresetDictionary) {
		t.Errorf("python-uefivars' store: Decode = %v, want its header and CRC accepted and ErrPresetDictionary", err)
	}

	ours, err := uefivars.Encode(vars)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := base64.StdEncoding.DecodeString(ours)
	zr, err := zlib.NewReader(bytes.NewReader(b[16:]))
	if err != nil {
		t.Fatal(err)
	}
	ourPayload, _ := io.ReadAll(zr)
	if !bytes.Equal(ourPayload, pyPayload) {
		t.Errorf("payloads differ at byte %d:\nEncode         %x\npython-uefivars %x", firstDiff(ourPayload, pyPayload), ourPayload, pyPayload)
	}
	if !bytes.Equal(pyPayload, want) {
		t.Errorf("python-uefivars' payload is not the layout's (the test's layout is wrong) at byte %d", firstDiff(pyPayload, want))
	}

	// python-uefivars reads Encode's store.
	var back struct {
		Variables []pyVar `json:"variables"`
	}
	if err := json.Unmarshal(run(bin, "-i", "aws", "-I", write("ours.aws", []byte(ours)), "-o", "json"), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Variables) != len(in) {
		t.Fatalf("python-uefivars reads %d variables, want %d", len(back.Variables), len(in))
	}
	for i, v := range back.Variables {
		if v != in[i] {
			t.Errorf("python-uefivars reads variable %d as %+v, want %+v", i, v, in[i])
		}
	}
}
