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
// service, or changed after signing, fails here as at AWS; so does one
// signed more than maxSkew away from now, the server's clock.
func verifySignature(r *http.Request, sig sigv4, creds aws.Credentials, now time.Time) *Fault {
	mismatch := func(format string, args ...any) *Fault {
		return &Fault{Status: 403, Code: "SignatureDoesNotMatch", Message: fmt.Sprintf(format, args...)}
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return mismatch("X-Amz-Date %q: %v", r.Header.Get("X-Amz-Date"), err)
	}
	if when.Format("20060102") != sig.date {
		return mismatch("X-Amz-Date %s is not the credential scope's day %s", r.Header.Get("X-Amz-Date"), sig.date)
	}
	if d := now.Sub(when); d > maxSkew || d < -maxSkew {
		return &Fault{Status: 403, Code: "RequestTimeTooSkewed", Message: fmt.Sprintf(
			"The difference between the request time (X-Amz-Date %s) and the server time (%s) is more than 5 minutes",
			r.Header.Get("X-Amz-Date"), now.UTC().Format("20060102T150405Z"))}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return mismatch("read body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != "UNSIGNED-PAYLOAD" {
		if h != payload {
			return mismatch("X-Amz-Content-Sha256 %s does not match the body's %s", h, payload)
		}
	} else if h == "UNSIGNED-PAYLOAD" {
		payload = h
	}

	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return mismatch("%v", err)
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
				return mismatch("signed header %s is missing", name)
			}
			again.Header[http.CanonicalHeaderKey(name)] = vs
		}
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, payload, sig.service, sig.region, when); err != nil {
		return mismatch("sign: %v", err)
	}
	want, err := parseAuth(again.Header.Get("Authorization"))
	if err != nil {
		return mismatch("%v", err)
	}
	if want.signedHeaders != sig.signedHeaders || want.signature != sig.signature {
		return mismatch("SignatureDoesNotMatch: the request signature we calculated does not match the signature you provided (signed headers %s)", sig.signedHeaders)
	}
	return nil
}

// maxSkew is how far a request's X-Amz-Date may be from the server's
// clock. AWS IAM User Guide, "AWS Signature Version 4 for API requests"
// (signing elements): a signed request is valid within five minutes of
// its time stamp; outside that window AWS refuses it, and the services
// answer 403 RequestTimeTooSkewed (EC2, EBS, SSM alike).
const maxSkew = 5 * time.Minute
