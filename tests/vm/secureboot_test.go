package vm

import (
	"encoding/pem"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hotpath-dev/hotpath/image/pcr"
)

func TestArgsSecureBootAndTPM(t *testing.T) {
	cfg := Config{Disk: "d.img", CPUs: 1, MemoryMB: 256, Accel: "tcg", SecureBoot: true, OVMFCode: SnakeoilCode}
	args := strings.Join(cfg.Args("vars.fd", "qmp.sock"), " ")
	for _, want := range []string{"-machine smm=on", "driver=cfi.pflash01,property=secure,value=on", "file=" + SnakeoilCode} {
		if !strings.Contains(args, want) {
			t.Errorf("Secure Boot args lack %q:\n%s", want, args)
		}
	}
	cfg.SecureBoot = false
	if args := strings.Join(cfg.Args("vars.fd", "qmp.sock"), " "); strings.Contains(args, "smm=on") {
		t.Errorf("SMM without SecureBoot: %s", args)
	}
	tpm := &SWTPM{Socket: "/run/x/swtpm.sock"}
	if a := strings.Join(tpm.Args("amd64"), " "); !strings.Contains(a, "tpm-crb,tpmdev=tpm0") || !strings.Contains(a, "path=/run/x/swtpm.sock") {
		t.Errorf("amd64 TPM args: %s", a)
	}
	if a := strings.Join(tpm.Args("arm64"), " "); !strings.Contains(a, "tpm-tis-device") {
		t.Errorf("arm64 TPM args: %s", a)
	}
}

// TestStartSWTPM manufactures and starts a TPM and stops it again.
func TestStartSWTPM(t *testing.T) {
	if _, err := exec.LookPath("swtpm_setup"); err != nil {
		t.Skip("swtpm not installed (image/deps.sh test)")
	}
	tp, err := StartSWTPM(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tp.Socket); err != nil {
		t.Error(err)
	}
	if err := tp.Close(); err != nil {
		t.Error(err)
	}
	select {
	case <-tp.done:
	default:
		t.Error("swtpm still running after Close")
	}
}

func TestSnakeoilFiles(t *testing.T) {
	for _, f := range []string{SnakeoilCode, SnakeoilVars, SnakeoilKey, SnakeoilCert} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%v (the ovmf package: image/deps.sh test)", err)
		}
	}
}

// TestReadOVMFVars reads the snakeoil template: its PK, KEK and db are
// signature lists, and db holds the snakeoil certificate.
func TestReadOVMFVars(t *testing.T) {
	vars, err := ReadOVMFVars(SnakeoilVars)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"PK", "KEK", "db"} {
		if v, ok := vars[name]; !ok || v.Attrs != 0x27 || len(v.Data) < 28 {
			t.Errorf("%s: %+v", name, v.Attrs)
		}
	}
	pemBytes, err := os.ReadFile(SnakeoilCert)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pemBytes)
	if _, ok := pcr.DBEntry(vars["db"].Data, blk.Bytes); !ok {
		t.Error("the snakeoil certificate is not in db")
	}
	if _, err := ReadOVMFVars(SnakeoilCert); err == nil {
		t.Error("a certificate read as a variable store")
	}
}
