package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/sign"
)

// TestBuildSigned: a signed build is byte-reproducible for the same key,
// its manifest names the certificate and carries PCR references computed
// from the signed binary, and neither the disk nor the manifest nor the
// build log holds the private key.
func TestBuildSigned(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "hotpath db"}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<32, 0)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	cert, _ := x509.ParseCertificate(der)
	key := &sign.Key{Signer: priv, Cert: cert}

	mod := fixtures(t)
	k := standInKernel(t)
	build := func(signed bool) (*Result, []byte, []byte) {
		t.Helper()
		o := options(t, mod, k)
		var log bytes.Buffer
		o.Log = &log
		if signed {
			o.Sign = key
		}
		r, err := Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		disk, _ := os.ReadFile(r.Disk)
		man, _ := os.ReadFile(r.Manifest)
		return r, append(disk, man...), log.Bytes()
	}
	a, aBytes, aLog := build(true)
	b, _, _ := build(true)
	u, _, _ := build(false)
	if a.DiskSHA256 != b.DiskSHA256 {
		t.Errorf("two signed builds differ: %s %s", a.DiskSHA256, b.DiskSHA256)
	}
	if a.M.Signature == nil || a.M.Signature.CertSHA256 != key.Fingerprint() || a.M.Signature.UnsignedSHA256 != u.M.EFI.SHA256 {
		t.Errorf("signature in the manifest %+v; want the key's fingerprint and the unsigned binary %s", a.M.Signature, u.M.EFI.SHA256)
	}
	if a.DiskSHA256 == u.DiskSHA256 || u.M.Signature != nil {
		t.Error("the signed and unsigned builds are the same disk")
	}
	efi := aBytes[a.M.Disk.ESP.BootPathOff : a.M.Disk.ESP.BootPathOff+a.M.EFI.Size]
	if l, err := authenticode.Parse(efi); err != nil || !l.Signed() {
		t.Errorf("the disk's binary is not signed: %v", err)
	}
	want, _ := Measurements(efi)
	if len(a.M.Measurements) != 2 || a.M.Measurements[0] != want[0] {
		t.Errorf("manifest measurements %+v, want %+v", a.M.Measurements, want)
	}
	// Signing leaves the Authenticode digest, and so PCR 4, as it was (the
	// stand-in is 8-byte aligned, as bzImages are, so Pad adds nothing).
	if a.M.Measurements[0] != u.M.Measurements[0] {
		t.Errorf("PCR 4 of the signed build %+v, unsigned %+v", a.M.Measurements[0], u.M.Measurements[0])
	}
	secret := priv.D.Bytes()
	p8, _ := x509.MarshalPKCS8PrivateKey(priv)
	for what, b := range map[string][]byte{"disk and manifest": aBytes, "log": aLog} {
		if bytes.Contains(b, secret) || bytes.Contains(b, p8) {
			t.Errorf("the private key is in the %s", what)
		}
	}
}
