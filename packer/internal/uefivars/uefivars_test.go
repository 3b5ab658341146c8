package uefivars_test

import (
	"bytes"
	"compress/zlib"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/packer/internal/uefivars"
)

func cert(t *testing.T, cn string) []byte {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestRoundTrip(t *testing.T) {
	certs := uefivars.SecureBootCerts{PK: cert(t, "pk"), KEK: [][]byte{cert(t, "kek")}, DB: [][]byte{cert(t, "db1"), cert(t, "db2")}}
	vars, err := certs.Variables()
	if err != nil {
		t.Fatal(err)
	}
	vars = append(vars, uefivars.Variable{Name: "BootOrder", GUID: uefivars.GlobalVariable, Attrs: 7, Data: []byte{0, 0}})
	s, err := uefivars.Encode(vars)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := uefivars.Encode(vars)
	if s != again {
		t.Error("Encode is not deterministic")
	}
	got, err := uefivars.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d variables back", len(got))
	}
	for i, v := range got {
		if v.Name != vars[i].Name || v.GUID != vars[i].GUID || v.Attrs != vars[i].Attrs || !bytes.Equal(v.Data, vars[i].Data) {
			t.Errorf("variable %d: %+v, want %+v", i, v.Name, vars[i].Name)
		}
	}
	db, err := uefivars.Certificates(got[2].Data)
	if err != nil || len(db) != 2 || db[1].Subject.CommonName != "db2" {
		t.Errorf("db certificates %v, %v", db, err)
	}
	if g := uefivars.GlobalVariable.String(); g != "8be4df61-93ca-11d2-aa0d-00e098032b8c" {
		t.Errorf("GUID round trip %s", g)
	}
	// The header as the format defines it.
	raw, _ := base64.StdEncoding.DecodeString(s)
	if string(raw[:8]) != "AMZNUEFI" {
		t.Errorf("magic bytes %q", raw[:8])
	}
}

// header rebuilds a store around a zlib stream z with a correct CRC.
func header(z []byte, version uint32) string {
	body := binary.LittleEndian.AppendUint32(nil, version)
	body = append(body, z...)
	h := binary.LittleEndian.AppendUint64(nil, uefivars.Magic)
	h = binary.LittleEndian.AppendUint32(h, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(append(h, body...))
}

func deflate(p []byte, dict []byte) []byte {
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevelDict(&b, 9, dict)
	w.Write(p)
	w.Close()
	return b.Bytes()
}

func TestDecodeRefuses(t *testing.T) {
	good, _ := uefivars.Encode([]uefivars.Variable{{Name: "X", Attrs: 7, Data: []byte("v")}})
	raw, _ := base64.StdEncoding.DecodeString(good)
	flip := func(i int) string {
		b := bytes.Clone(raw)
		b[i] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"not base64", "not base64!", "not base64"},
		{"short", base64.StdEncoding.EncodeToString([]byte("AMZNUEFI")), "shorter"},
		{"magic", flip(0), "magic"},
		{"crc", flip(len(raw) - 1), "CRC32C"},
		{"version", header(raw[16:], 1), "version"},
		{"not zlib", header([]byte("plain"), 0), "zlib"},
		{"truncated list", header(deflate([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1}, nil), 0), "truncated"},
		{"trailing bytes", header(deflate(make([]byte, 12), nil), 0), "after the last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := uefivars.Decode(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, want an error with %q", err, tc.want)
			}
		})
	}
	// A stream that needs a preset dictionary decodes up to it.
	dict := header(deflate(make([]byte, 8), []byte("some dictionary")), 0)
	if _, err := uefivars.Decode(dict); !errors.Is(err, uefivars.ErrPresetDictionary) {
		t.Errorf("preset dictionary: %v", err)
	}
}

func TestVariablesRefuseNonCertificates(t *testing.T) {
	c := uefivars.SecureBootCerts{PK: []byte("not DER"), KEK: [][]byte{cert(t, "k")}, DB: [][]byte{cert(t, "d")}}
	if _, err := c.Variables(); err == nil {
		t.Error("a PK that is not a certificate was accepted")
	}
	if _, err := (uefivars.SecureBootCerts{PK: cert(t, "p")}).Variables(); err == nil {
		t.Error("no KEK and db accepted")
	}
}
