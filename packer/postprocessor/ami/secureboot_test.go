package ami

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	registryimage "github.com/hashicorp/packer-plugin-sdk/packer/registry/image"
	"github.com/hotpath-dev/hotpath/image/manifest"
	"github.com/hotpath-dev/hotpath/image/pcr"
	"github.com/hotpath-dev/hotpath/packer/internal/fakeaws"
	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
	"github.com/hotpath-dev/hotpath/packer/internal/uitest"
)

// certFile writes a self-signed certificate as PEM into dir and returns
// its path and DER.
func certFile(t *testing.T, dir, cn string) (string, []byte) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, cn+".pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, der
}

// TestSecureBootCertsRoundTrip: secure_boot_certs become a uefi_data that
// the fake EC2 decodes (with the reader the tests use) to PK, KEK and db
// holding exactly those certificates; the AMI registers with NitroTPM, and
// the manifest's reference PCRs reach the artifact and the HCP metadata.
func TestSecureBootCertsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	pk, pkDER := certFile(t, dir, "pk")
	kek, kekDER := certFile(t, dir, "kek")
	db, dbDER := certFile(t, dir, "db")
	f := fakeaws.New("AKIDPP", "secret")
	defer f.Close()
	path, _ := diskFile(t, 2*bs, []int{0}, -1)
	dbSum := sha256.Sum256(dbDER)
	m := &manifest.Manifest{Format: manifest.Format, Architecture: "amd64", Signature: &manifest.Signature{CertSHA256: hex.EncodeToString(dbSum[:])}, Measurements: []manifest.Measurement{
		{PCR: 4, SHA256: strings.Repeat("a", 64), SHA384: strings.Repeat("b", 96)},
		{PCR: 12, SHA256: strings.Repeat("0", 64), SHA384: strings.Repeat("0", 96)},
	}}
	mp := filepath.Join(filepath.Dir(path), "manifest.json")
	if err := m.WriteFile(mp); err != nil {
		t.Fatal(err)
	}
	pp := newPP(t, f, map[string]interface{}{
		"tpm_support":       "v2.0",
		"secure_boot_certs": map[string]interface{}{"pk": pk, "kek": []string{kek}, "db": []string{db}},
	})
	ui := new(uitest.UI)
	a, _, _, err := pp.PostProcess(context.Background(), ui, &packersdk.MockArtifact{FilesValue: []string{path, mp}})
	if err != nil {
		t.Fatal(err)
	}
	if s := "(x86_64, UEFI, ENA, IMDSv2 only, NitroTPM v2.0, UEFI variables (Secure Boot keys))..."; !ui.Contains(s) {
		t.Errorf("UI does not say %q:\n%s", s, ui.Text())
	}
	ims := f.Images()
	if len(ims) != 1 {
		t.Fatalf("%d images", len(ims))
	}
	im := ims[0]
	if im.Tpm != "v2.0" || im.UEFIData == "" {
		t.Fatalf("image registered with TPM %q, UefiData %d bytes", im.Tpm, len(im.UEFIData))
	}
	want := map[string][]byte{"PK": pkDER, "KEK": kekDER, "db": dbDER}
	for _, v := range im.UEFIVars {
		certs, err := uefivars.Certificates(v.Data)
		if err != nil || len(certs) != 1 || !bytes.Equal(certs[0].Raw, want[v.Name]) || v.Attrs != uefivars.SecureBootAttrs {
			t.Errorf("%s: %d certificates (%v), attributes %#x", v.Name, len(certs), err, v.Attrs)
		}
		delete(want, v.Name)
	}
	if len(want) != 0 {
		t.Errorf("variables missing from the store EC2 got: %v", want)
	}
	t.Run("python-uefivars", func(t *testing.T) { crossCheckUefivars(t, im.UEFIData) })

	art := a.(*Artifact)
	got := art.State("pcrs").([]manifest.Measurement)
	if len(got) != 3 || got[0].SHA384 != m.Measurements[0].SHA384 {
		t.Fatalf("artifact PCRs %+v", got)
	}
	// PCR 7 from the store EC2 got and the signer's db entry.
	entry, ok := pcr.DBEntry(uefivars.SignatureLists([][]byte{dbDER}), dbDER)
	want7 := specPCR7(crypto.SHA384, uefivars.SignatureLists([][]byte{pkDER}), uefivars.SignatureLists([][]byte{kekDER}), uefivars.SignatureLists([][]byte{dbDER}), nil, entry)
	if !ok || got[2].PCR != 7 || got[2].SHA384 != want7 {
		t.Errorf("PCR 7 reference %+v, want sha384 %s", got[2], want7)
	}
	imgs := art.State(registryimage.ArtifactStateURI).([]*registryimage.Image)
	if l := imgs[0].Labels["pcr4_sha384"]; l != m.Measurements[0].SHA384 {
		t.Errorf("HCP label pcr4_sha384 = %q", l)
	}

	// The same store given as uefi_data reaches EC2 unchanged.
	f2 := fakeaws.New("AKIDPP", "secret")
	defer f2.Close()
	pp2 := newPP(t, f2, map[string]interface{}{"uefi_data": im.UEFIData})
	if _, _, _, err := pp2.PostProcess(context.Background(), new(uitest.UI), input(t, path)); err != nil {
		t.Fatal(err)
	}
	if got := f2.Images()[0].UEFIData; got != im.UEFIData {
		t.Error("uefi_data changed on its way to RegisterImage")
	}
}

// crossCheckUefivars decodes the store with awslabs' python-uefivars
// where it is installed (it is not a Debian package; pip's uefivars), and
// is a reported skip where it is not. (internal/uefivars'
// TestPythonUefivars compares the bytes themselves.)
func crossCheckUefivars(t *testing.T, data string) {
	bin, err := exec.LookPath("uefivars")
	if err != nil {
		t.Skip("python-uefivars is not installed (no uefivars command on PATH; it comes from PyPI): no cross-check against AWS's own tool")
	}
	in := filepath.Join(t.TempDir(), "store.aws")
	os.WriteFile(in, []byte(data), 0o644)
	out, err := exec.Command(bin, "-i", "aws", "-I", in, "-o", "json").CombinedOutput()
	if err != nil {
		t.Errorf("uefivars could not read the store: %v\n%s", err, out)
	}
	for _, name := range []string{"PK", "KEK", "db"} {
		if !strings.Contains(string(out), `"name": "`+name+`"`) {
			t.Errorf("uefivars does not list %s:\n%s", name, out)
		}
	}
	// python-uefivars reads its EMPTY_DIGEST (32 zero bytes) as none and
	// leaves it out; any other digest (an empty one) it would list.
	if strings.Contains(string(out), `"digest"`) {
		t.Errorf("uefivars lists a digest: the store does not carry the empty digest as python-uefivars writes it:\n%s", out)
	}
}

func TestPrepareSecureBootRefusals(t *testing.T) {
	dir := t.TempDir()
	pk, _ := certFile(t, dir, "pk")
	notCert := filepath.Join(dir, "key.pem")
	os.WriteFile(notCert, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}}), 0o600)
	garbage := filepath.Join(dir, "garbage.der")
	os.WriteFile(garbage, []byte("not DER at all"), 0o644)
	good, _ := uefivars.Encode([]uefivars.Variable{{Name: "BootOrder", GUID: uefivars.GlobalVariable, Attrs: 7, Data: []byte{0, 0}}})
	bad := func(name string, guid uefivars.GUID) string {
		s, _ := uefivars.Encode([]uefivars.Variable{{Name: name, GUID: guid, Attrs: uefivars.SecureBootAttrs, Data: []byte("short")}})
		return s
	}
	certs := func(pk string, kek, db []string) map[string]interface{} {
		return map[string]interface{}{"pk": pk, "kek": kek, "db": db}
	}
	for _, tc := range []struct {
		name string
		raw  map[string]interface{}
		want string
	}{
		{"uefi_data not base64", with("uefi_data", "@@@"), "uefi_data does not decode"},
		{"uefi_data not a store", with("uefi_data", "aGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGEgc3RvcmU="), "uefi_data does not decode"},
		{"uefi_data with a bad db", with("uefi_data", bad("db", uefivars.ImageSecurityDatabase)), "uefi_data: db"},
		{"uefi_data with a bad PK", with("uefi_data", bad("PK", uefivars.GlobalVariable)), "uefi_data: PK"},
		{"uefi_data with a bad KEK", with("uefi_data", bad("KEK", uefivars.GlobalVariable)), "uefi_data: KEK"},
		{"pk a private key", with("secure_boot_certs", certs(notCert, []string{pk}, []string{pk})), "not a CERTIFICATE"},
		{"db not DER", with("secure_boot_certs", certs(pk, []string{pk}, []string{garbage})), "is not an X.509 certificate"},
		{"no db", with("secure_boot_certs", certs(pk, []string{pk}, nil)), "at least one db"},
		{"no pk", with("secure_boot_certs", certs("", []string{pk}, []string{pk})), "pk is required"},
		{"kek alone", with("secure_boot_certs", certs("", []string{pk}, nil)), "pk is required"},
		{"pk alone", with("secure_boot_certs", certs(pk, nil, nil)), "at least one db"},
		{"both", with("uefi_data", good, "secure_boot_certs", certs(pk, []string{pk}, []string{pk})), "give one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			_, err := c.Prepare(tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Prepare = %v, want an error with %q", err, tc.want)
			}
		})
	}
	var c Config
	if _, err := c.Prepare(with("uefi_data", good)); err != nil || c.uefiData != good {
		t.Errorf("a store that decodes: %v", err)
	}
}

// TestSecureBootPCRFromUEFIData: PCR 7's reference from a uefi_data store
// as EC2 gets it: PK, KEK, db (the signer second of two certificates) and
// dbx (a list of SHA-256 hashes, which Prepare does not take for
// certificates) are found by name and vendor GUID, and the store's other
// variables (BootOrder after KEK, dbt after dbx) are not mistaken for them.
func TestSecureBootPCRFromUEFIData(t *testing.T) {
	dir := t.TempDir()
	_, pk := certFile(t, dir, "pk")
	_, kek := certFile(t, dir, "kek")
	_, other := certFile(t, dir, "other")
	_, signer := certFile(t, dir, "signer")
	db := uefivars.SignatureLists([][]byte{other, signer})
	// One EFI_SIGNATURE_LIST of EFI_CERT_SHA256_GUID with one hash.
	dbx := append(mustGUID(t, "c1c41626-504c-4092-aca9-41f936934328"), 28+48, 0, 0, 0, 0, 0, 0, 0, 48, 0, 0, 0)
	dbx = append(append(dbx, uefivars.HotpathOwner[:]...), bytes.Repeat([]byte{0xab}, 32)...)
	const sb = uefivars.SecureBootAttrs
	data, err := uefivars.Encode([]uefivars.Variable{
		{Name: "PK", GUID: uefivars.GlobalVariable, Attrs: sb, Data: uefivars.SignatureLists([][]byte{pk})},
		{Name: "KEK", GUID: uefivars.GlobalVariable, Attrs: sb, Data: uefivars.SignatureLists([][]byte{kek})},
		{Name: "BootOrder", GUID: uefivars.GlobalVariable, Attrs: 7, Data: []byte{0, 0}},
		{Name: "db", GUID: uefivars.ImageSecurityDatabase, Attrs: sb, Data: db},
		{Name: "dbx", GUID: uefivars.ImageSecurityDatabase, Attrs: sb, Data: dbx},
		{Name: "dbt", GUID: uefivars.ImageSecurityDatabase, Attrs: sb, Data: uefivars.SignatureLists([][]byte{other})},
	})
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	if _, err := c.Prepare(with("uefi_data", data)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(signer)
	m := &manifest.Manifest{Format: manifest.Format, Architecture: "amd64", Signature: &manifest.Signature{CertSHA256: hex.EncodeToString(sum[:])}}
	mp := filepath.Join(dir, "manifest.json")
	if err := m.WriteFile(mp); err != nil {
		t.Fatal(err)
	}
	got, err := imageMeasurements(&packersdk.MockArtifact{FilesValue: []string{mp}}, c.uefiVars)
	entry, ok := pcr.DBEntry(db, signer)
	pkl, kekl := uefivars.SignatureLists([][]byte{pk}), uefivars.SignatureLists([][]byte{kek})
	want256, want384 := specPCR7(crypto.SHA256, pkl, kekl, db, dbx, entry), specPCR7(crypto.SHA384, pkl, kekl, db, dbx, entry)
	if err != nil || !ok || len(got) != 1 || got[0].PCR != 7 || got[0].SHA256 != want256 || got[0].SHA384 != want384 {
		t.Errorf("measurements %+v, %v; want PCR 7 sha256 %s sha384 %s", got, err, want256, want384)
	}
}

func mustGUID(t *testing.T, s string) []byte {
	t.Helper()
	g, err := uefivars.ParseGUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g[:]
}
