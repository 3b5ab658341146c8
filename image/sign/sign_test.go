package sign_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/image/authenticode"
	"github.com/hotpath-dev/hotpath/image/authenticode/authenticodetest"
	"github.com/hotpath-dev/hotpath/image/sign"
)

// newKey makes an RSA-2048 key and a self-signed certificate for it, and
// writes both as PEM files into dir.
func newKey(t *testing.T, dir string) (keyPath, certPath string, k *sign.Key) {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "hotpath test db"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<32, 0),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyPath, certPath = filepath.Join(dir, "db.key"), filepath.Join(dir, "db.crt")
	pk, _ := x509.MarshalPKCS8PrivateKey(priv)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600)
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	return keyPath, certPath, &sign.Key{Signer: priv, Cert: cert}
}

func TestSignDeterministicAndVerifies(t *testing.T) {
	dir := t.TempDir()
	keyPath, certPath, _ := newKey(t, dir)
	k, err := sign.LoadFiles(keyPath, certPath)
	if err != nil {
		t.Fatal(err)
	}
	pe := authenticodetest.PE(bytes.Repeat([]byte("kernel "), 300), []byte("tail"))
	a, err := sign.Sign(pe, k)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sign.Sign(pe, k)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two signatures of the same binary with the same key differ")
	}
	// The signature covers the digest of the padded binary, which the
	// signed binary keeps.
	d0, _ := authenticode.Digest(authenticode.Pad(pe), crypto.SHA256)
	d1, _ := authenticode.Digest(a, crypto.SHA256)
	if !bytes.Equal(d0, d1) {
		t.Errorf("signed digest %x, unsigned %x", d1, d0)
	}
	signed := filepath.Join(dir, "signed.efi")
	os.WriteFile(signed, a, 0o644)
	sbverify(t, certPath, signed, true)

	// One byte of the signed binary changed: the signature no longer holds.
	bad := bytes.Clone(a)
	bad[0x200+10] ^= 1
	tampered := filepath.Join(dir, "tampered.efi")
	os.WriteFile(tampered, bad, 0o644)
	sbverify(t, certPath, tampered, false)

	// Another key's certificate does not verify it.
	_, otherCert, _ := newKey(t, t.TempDir())
	sbverify(t, otherCert, signed, false)
}

// sbverify checks the signature with sbsigntool's verifier, an independent
// implementation (OpenSSL's PKCS#7, sbsigntool's own digest).
func sbverify(t *testing.T, cert, file string, ok bool) {
	t.Helper()
	if _, err := exec.LookPath("sbverify"); err != nil {
		t.Skip("sbverify not installed (image/deps.sh test installs sbsigntool)")
	}
	out, err := exec.Command("sbverify", "--cert", cert, file).CombinedOutput()
	if (err == nil) != ok {
		t.Errorf("sbverify --cert %s %s: %v (want ok=%v)\n%s", filepath.Base(cert), filepath.Base(file), err, ok, out)
	}
}

func TestKeyRefused(t *testing.T) {
	dir := t.TempDir()
	keyPath, certPath, k := newKey(t, dir)
	_, otherCert, _ := newKey(t, t.TempDir())
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecKey, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPath := filepath.Join(dir, "ec.key")
	os.WriteFile(ecPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecKey}), 0o600)
	encPath := filepath.Join(dir, "enc.key")
	os.WriteFile(encPath, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}), 0o600)
	for _, tc := range []struct{ name, key, cert, want string }{
		{"another certificate", keyPath, otherCert, "not the certificate's"},
		{"ECDSA", ecPath, certPath, "want RSA"},
		{"encrypted", encPath, certPath, "encrypted"},
		{"certificate as key", certPath, certPath, "want a private key"},
		{"key as certificate", keyPath, keyPath, "want CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sign.LoadFiles(tc.key, tc.cert)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadFiles = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if fp := k.Fingerprint(); len(fp) != 64 {
		t.Errorf("Fingerprint %q", fp)
	}
}
