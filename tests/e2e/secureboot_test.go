package e2e

import (
	"bytes"
	"context"
	"crypto"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image"
	"github.com/hotpath-dev/hotpath/image/attest"
	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/disk"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/image/pcr"
	"github.com/hotpath-dev/hotpath/image/sign"
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/hotpath-dev/hotpath/tests/vm"
)

// refusalTimeout bounds a boot that the firmware must refuse: firmware
// start (slower with SMM under TCG) to its message about the boot option.
const refusalTimeout = 4 * time.Minute

// TestSecureBoot boots under Debian's snakeoil OVMF, which enforces Secure
// Boot with the snakeoil certificate in db, and a software TPM:
//
//   - the default image signed with the snakeoil key boots, serves /json,
//     and its TPM's PCR 4 and 12 (SHA-256, SHA-384) are the manifest's
//     reference values, the boot application's logged digest is the
//     Authenticode digest of the binary on the disk;
//   - an image with another workload (the example API,
//     server/examples/catalog) has another reference, and a guest booting
//     it measures that other value; that boot also checks the example API
//     from outside (CheckCatalog: a route with a parameter, 400 with a JSON
//     body on bad JSON, 404 in JSON, 413 on the route with a lower limit),
//     so that the example costs no boot of its own; and its
//     /v1/proxy/{id} against a backend the test serves inside the
//     guest's namespace (CATALOG_BACKEND in the image's workload.env,
//     the deadline in workload.args): the backend's answer, and a hung
//     call's JSON 504 at the route's deadline, the call cancelled;
//   - the same default image unsigned, and the signed one with one byte of
//     the binary changed, are refused by the firmware: its message on the
//     console, no kernel, no workload.
//
// Four boots: two to the boot report, two that end at the firmware.
func TestSecureBoot(t *testing.T) {
	requireE2E(t)
	for _, f := range []string{vm.SnakeoilCode, vm.SnakeoilVars, vm.SnakeoilKey, vm.SnakeoilCert} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: install the test dependencies (image/deps.sh test: ovmf)", err)
		}
	}
	for _, p := range []string{"swtpm", "swtpm_setup", "openssl"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%v: install the test dependencies (image/deps.sh test)", err)
		}
	}
	key := snakeoilKey(t)
	signed := buildWith(t, image.Options{Sign: key})
	other := buildWith(t, image.Options{Sign: key, Workload: image.Program{Package: catalogPkg}, InitConfig: catalogInitConfig(vm.HostAddr)})
	unsigned := buildWith(t, image.Options{})

	if signed.M.Signature == nil || signed.M.Signature.CertSHA256 != key.Fingerprint() {
		t.Fatalf("manifest signature %+v, want the snakeoil certificate %s", signed.M.Signature, key.Fingerprint())
	}
	if unsigned.M.Signature != nil {
		t.Errorf("unsigned build's manifest has a signature: %+v", unsigned.M.Signature)
	}
	if pcr4(t, signed.M) == pcr4(t, other.M) {
		t.Fatalf("two workloads, one PCR 4 reference %s", pcr4(t, signed.M))
	}

	t.Run("signed", func(t *testing.T) {
		b := bootConfig(t, vm.Config{Disk: signed.Disk, CPUs: 2, SecureBoot: true, TPM: true}, 0)
		if !strings.Contains(b.Console.String(), "EFI stub: UEFI Secure Boot is enabled") {
			t.Error("the kernel's EFI stub did not see Secure Boot enabled")
		}
		t.Run("http", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := CheckGet(ctx, b.dial, JSON); err != nil {
				t.Error(err)
			}
		})
		t.Run("pcrs", func(t *testing.T) { checkMeasured(t, b.rep, signed) })
		t.Run("pcr7", func(t *testing.T) { checkSecureBootPolicy(t, b.rep, key) })
	})
	t.Run("other-workload", func(t *testing.T) {
		backend := NewCatalogBackend()
		serveBackend := func(ns *vm.Netns) error {
			// Inside the namespace, on the tap's address: what the
			// guest's CATALOG_BACKEND names.
			var l net.Listener
			if err := ns.Do(func() (err error) {
				l, err = net.Listen("tcp4", net.JoinHostPort(vm.HostAddr, strconv.Itoa(catalogBackendPort)))
				return err
			}); err != nil {
				return fmt.Errorf("catalog backend in %s: %w", ns.Name, err)
			}
			srv := &http.Server{Handler: backend, ReadHeaderTimeout: 10 * time.Second}
			go srv.Serve(l)
			t.Cleanup(func() { backend.Close(); srv.Close() })
			return nil
		}
		b := bootConfig(t, vm.Config{Disk: other.Disk, CPUs: 2, SecureBoot: true, TPM: true, Prepare: serveBackend}, 0)
		checkMeasured(t, b.rep, other)
		if got := tpmDetail(t, b.rep)["pcr4.sha256"]; got == pcr4(t, signed.M) {
			t.Errorf("another workload measured the default image's PCR 4 %s", got)
		}
		t.Run("catalog-api", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			reportErrs(t, CheckCatalog(ctx, b.Netns.HTTPClient(30*time.Second), "http://"+net.JoinHostPort(b.Addr, b.port)))
		})
		t.Run("catalog-proxy", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// slack: TCG's scheduling, seen at well under a second.
			reportErrs(t, CheckCatalogProxy(ctx, b.Netns.HTTPClient(30*time.Second), "http://"+net.JoinHostPort(b.Addr, b.port),
				backend, catalogProxyTimeout, 5*time.Second))
		})
	})
	t.Run("unsigned-refused", func(t *testing.T) { checkRefused(t, unsigned.Disk) })
	t.Run("tampered-refused", func(t *testing.T) { checkRefused(t, tamper(t, signed)) })
}

// snakeoilKey decrypts the ovmf package's snakeoil key (encrypted PKCS#8,
// which Go's x509 does not read) into the test's temporary directory and
// loads it.
func snakeoilKey(t *testing.T) *sign.Key {
	t.Helper()
	plain := filepath.Join(t.TempDir(), "snakeoil.key")
	out, err := exec.Command("openssl", "pkey", "-in", vm.SnakeoilKey, "-passin", "pass:"+vm.SnakeoilKeyPassword, "-out", plain).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl pkey: %v\n%s", err, out)
	}
	k, err := sign.LoadFiles(plain, vm.SnakeoilCert)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pcr4(t *testing.T, m *manifest.Manifest) string {
	t.Helper()
	for _, ms := range m.Measurements {
		if ms.PCR == 4 {
			return ms.SHA256
		}
	}
	t.Fatal("the manifest has no PCR 4 reference")
	return ""
}

func tpmDetail(t *testing.T, rep *report.Report) map[string]string {
	t.Helper()
	s, ok := rep.Step(attest.StepName)
	if !ok || s.Status != report.Applied {
		t.Fatalf("tpm step: %+v", s)
	}
	return s.Detail
}

// checkMeasured compares the guest's TPM with the manifest, and the event
// log's boot application entry with the Authenticode digest of the binary
// read back from the disk here (not the manifest's word for it).
func checkMeasured(t *testing.T, rep *report.Report, res *image.Result) {
	t.Helper()
	rs, err := attest.Compare(rep, res.M)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if !attest.Write(&out, rs) {
		t.Errorf("the TPM does not hold the manifest's reference values:\n%s", out.String())
	}
	t.Logf("measured boot:\n%s", out.String())
	d := tpmDetail(t, rep)
	efi := readEFI(t, res)
	for bank, h := range map[string]crypto.Hash{"sha256": crypto.SHA256, "sha384": crypto.SHA384} {
		want, err := authenticode.Digest(efi, h)
		if err != nil {
			t.Fatal(err)
		}
		if got := d["boot_app."+bank]; got != hex.EncodeToString(want) {
			t.Errorf("event log's EV_EFI_BOOT_SERVICES_APPLICATION %s = %q, want the disk's binary's %x", bank, got, want)
		}
	}
	if got, want := d["log.pcr4"], "EV_EFI_ACTION,EV_SEPARATOR,EV_EFI_BOOT_SERVICES_APPLICATION"; got != want {
		t.Errorf("PCR 4 events %s, want %s", got, want)
	}
}

// readEFI reads the loader's bytes from the disk where the manifest says
// they start.
func readEFI(t *testing.T, res *image.Result) []byte {
	t.Helper()
	f, err := os.Open(res.Disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, res.M.EFI.Size)
	if _, err := f.ReadAt(b, res.M.Disk.ESP.BootPathOff); err != nil {
		t.Fatal(err)
	}
	return b
}

// tamper writes a disk whose EFI binary is the signed one with one byte of
// its code changed.
func tamper(t *testing.T, res *image.Result) string {
	t.Helper()
	efi := readEFI(t, res)
	efi[len(efi)/2] ^= 0x01
	seed := []byte("tampered")
	p := filepath.Join(t.TempDir(), "tampered.img")
	if _, err := disk.Write(p, efi, disk.Options{
		DiskGUID: disk.DeriveGUID(seed, "disk"), PartGUID: disk.DeriveGUID(seed, "esp"), VolumeID: disk.DeriveVolumeID(seed),
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkRefused boots disk under Secure Boot and waits for the firmware to
// say it did not start the boot option; the kernel must never have run.
func checkRefused(t *testing.T, disk string) {
	ctx, cancel := context.WithTimeout(context.Background(), refusalTimeout)
	defer cancel()
	// No network: the guest must not get that far.
	g, err := vm.Start(ctx, vm.Config{Disk: disk, CPUs: 1, SecureBoot: true, Accel: vm.Accel()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	start := time.Now()
	at, err := g.Console.WaitString(ctx, 0, "BdsDxe: failed to load Boot")
	if err != nil {
		t.Fatal(err)
	}
	con := g.Console.String()
	line := con[strings.LastIndex(con[:at-1], "\n")+1 : at]
	t.Logf("refused after %v: %s", time.Since(start).Round(time.Second), strings.TrimSpace(line))
	if !strings.Contains(line, "Access Denied") && !strings.Contains(line, "Security Violation") {
		t.Errorf("the firmware did not load the boot option, but not for Secure Boot: %q", line)
	}
	for _, s := range []string{"EFI stub", "Linux version", report.ReportPrefix} {
		if strings.Contains(con, s) {
			t.Errorf("the kernel ran (%q on the console)", s)
		}
	}
}

// checkSecureBootPolicy works PCR 7 out from the snakeoil variable store
// (read here from the firmware's template) and the signer's db entry, and
// compares it with what the guest's TPM holds.
func checkSecureBootPolicy(t *testing.T, rep *report.Report, key *sign.Key) {
	vars, err := vm.ReadOVMFVars(vm.SnakeoilVars)
	if err != nil {
		t.Fatal(err)
	}
	sb := pcr.SecureBootVars{PK: vars["PK"].Data, KEK: vars["KEK"].Data, DB: vars["db"].Data, DBX: vars["dbx"].Data}
	entry, ok := pcr.DBEntry(sb.DB, key.Cert.Raw)
	if !ok {
		t.Fatal("the snakeoil certificate is not in the snakeoil db")
	}
	want := pcr.SecureBootPolicyValue(sb, entry)
	d := tpmDetail(t, rep)
	for _, bank := range []string{"sha256", "sha384"} {
		if got := d["pcr7."+bank]; got != want.Digests[bank] {
			t.Errorf("PCR 7 %s: the TPM holds %s, worked out %s (events %s)", bank, got, want.Digests[bank], d["log.pcr7"])
		}
	}
}
