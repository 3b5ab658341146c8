package fakeaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// authRE splits a SigV4 Authorization header: access key, date, region,
// service, signed headers, signature.
var authRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([a-z0-9-]+)/([a-z0-9]+)/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$`)

// sigv4 is a request's signature as sent.
type sigv4 struct {
	key, date, region, service string
	signedHeaders, signature   string
}

func parseAuth(h string) (sigv4, error) {
	m := authRE.FindStringSubmatch(h)
	if m == nil {
		return sigv4{}, fmt.Errorf("missing or malformed SigV4 Authorization header %q", h)
	}
	return sigv4{m[1], m[2], m[3], m[4], m[5], m[6]}, nil
}

// verifySignature recomputes the signature of r, as AWS does, with the
// SDK's own signer: over the headers the client signed (the transport adds
// others, Accept-Encoding, after signing), the time of X-Amz-Date, and the
// payload's hash (X-Amz-Content-Sha256 when sent, which must then match
// the body, else the body's SHA-256). It consumes r.Body and puts back a
// copy. A request signed with another secret, for another region or
// service, or changed after signing, fails here as at AWS.
func verifySignature(r *http.Request, sig sigv4, creds aws.Credentials) error {
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date %q: %w", r.Header.Get("X-Amz-Date"), err)
	}
	if when.Format("20060102") != sig.date {
		return fmt.Errorf("X-Amz-Date %s is not the credential scope's day %s", r.Header.Get("X-Amz-Date"), sig.date)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != "UNSIGNED-PAYLOAD" {
		if h != payload {
			return fmt.Errorf("X-Amz-Content-Sha256 %s does not match the body's %s", h, payload)
		}
	} else if h == "UNSIGNED-PAYLOAD" {
		payload = h
	}

	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	again.Host = r.Host
	for _, name := range strings.Split(sig.signedHeaders, ";") {
		switch name {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			vs, ok := r.Header[http.CanonicalHeaderKey(name)]
			if !ok {
				return fmt.Errorf("signed header %s is missing", name)
			}
			again.Header[http.CanonicalHeaderKey(name)] = vs
		}
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, payload, sig.service, sig.region, when); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	want, err := parseAuth(again.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	if want.signedHeaders != sig.signedHeaders || want.signature != sig.signature {
		return fmt.Errorf("SignatureDoesNotMatch: the request signature we calculated does not match the signature you provided (signed headers %s)", sig.signedHeaders)
	}
	return nil
}
