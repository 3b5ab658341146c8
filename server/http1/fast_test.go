package http1

import (
	"bytes"
	"fmt"
	"testing"
)

// FuzzFastPath parses every input twice, with the fast paths of fast.go
// and with the general parser alone, and requires the same result: the
// same error or length, and the same Request field by field (the slices
// at the same offsets of the input). Every split of the input is tried
// too, since the fast paths give up on a line that has not arrived in
// full. The seeds are the framing and edge cases of the other tests' kind
// plus the lines the fast paths stop at (a tab, a '%', a long line, every
// limit), and run in every `go test`.
func FuzzFastPath(f *testing.F) {
	for _, s := range []string{
		"GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
		"GET /json?x=1&y=%41 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n",
		"GET /a?b?c HTTP/1.0\r\n\r\n",
		"GET /? HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.9\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.x\r\nHost: a\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\n\r\n",
		"GET / HTTP/1.1\r\nHost:\ta\t\r\n\r\n",
		"GET / HTTP/1.1\r\nHost:  a  \r\nX-Y:\r\nZ: \r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: \x7f\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9 and more than eight\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX : b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n X: folded\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"POST /in HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
		"GET http://h/p HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"G\x00T / HTTP/1.1\r\n\r\n",
		"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /#f HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /" + string(bytes.Repeat([]byte("a"), 100)) + " HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: " + string(bytes.Repeat([]byte("v"), 100)) + "\r\n\r\n",
	} {
		f.Add([]byte(s), 128)
	}
	f.Fuzz(func(t *testing.T, in []byte, maxHeader int) {
		lim := Limits{MaxHeaderBytes: 16 + maxHeader&0x1ff, MaxBodyBytes: 64}
		for cut := len(in); cut >= 0; cut-- {
			// Fresh, and after a parse of the whole input (the Request
			// then knows its Host: knownHostLine).
			for _, prime := range [][]byte{nil, in} {
				fast, slow := parseBoth(in[:cut], prime, lim)
				if fast != slow {
					t.Fatalf("%q (limit %d, primed with %q):\nfast:    %s\ngeneral: %s", in[:cut], lim.MaxHeaderBytes, prime, fast, slow)
				}
			}
		}
	})
}

// parseBoth parses b with and without the fast paths (each on its own copy:
// a chunked body is decoded in place) and describes each result. With
// prime, the fast paths parse b with a Request that has parsed prime
// first, as a connection's next request is: what it remembers (the last
// valid Host) must not change the result.
func parseBoth(b, prime []byte, lim Limits) (fast, slow string) {
	describe := func(fastPaths bool) string {
		in := bytes.Clone(b)
		var r Request
		if fastPaths && prime != nil {
			parse(bytes.Clone(prime), &r, lim, nil, true)
		}
		n, err := parse(in, &r, lim, nil, fastPaths)
		if err != nil {
			return fmt.Sprintf("n=%d err=%v", n, err)
		}
		off := func(s []byte) string {
			if s == nil {
				return "nil"
			}
			if len(s) == 0 {
				return "empty"
			}
			// Every slice points into in: compare where, not only what.
			for i := range in {
				if &in[i] == &s[0] {
					return fmt.Sprintf("[%d:%d]", i, i+len(s))
				}
			}
			return fmt.Sprintf("outside %q", s)
		}
		d := fmt.Sprintf("n=%d method=%s target=%s path=%s query=%s minor=%d host=%s cl=%d chunked=%v body=%s hl=%d ka=%v kat=%v e100=%v headers=",
			n, off(r.Method), off(r.Target), off(r.Path), off(r.Query), r.Minor, off(r.Host), r.ContentLength,
			r.Chunked, off(r.Body), r.HeaderLen, r.KeepAlive, r.KeepAliveToken, r.Expect100)
		for _, h := range r.Headers[:r.NumHeaders] {
			d += off(h.Name) + ":" + off(h.Value) + " "
		}
		return d
	}
	return describe(true), describe(false)
}

// TestFastPathTaken checks that the requests the fast paths are for do
// take them: a request line and header lines that fall back to the
// general parser would still parse, and only the benchmarks would notice.
func TestFastPathTaken(t *testing.T) {
	b := []byte("GET /json?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: wrk/4.2 (a longer value)\r\nAccept: */*\r\n\r\n")
	var r Request
	p, ok := r.fastRequestLine(b, 0, len(b))
	if !ok || string(b[p-2:p]) != "\r\n" || string(r.Path) != "/json" || string(r.Query) != "x=1" || r.Minor != 1 {
		t.Fatalf("request line: ok=%v p=%d path %q query %q minor %d", ok, p, r.Path, r.Query, r.Minor)
	}
	var f fieldState
	end, done := r.fastFields(b, p, len(b), &f)
	if !done || end != len(b) {
		t.Fatalf("fields from %d: done=%v end=%d of %d", p, done, end, len(b))
	}
	if string(r.Host) != "127.0.0.1:8080" {
		t.Fatalf("Host %q: field not taken in", r.Host)
	}
	if r.NumHeaders != 3 || string(r.Headers[1].Value) != "wrk/4.2 (a longer value)" {
		t.Fatalf("headers %d, second %q", r.NumHeaders, r.Headers[1].Value)
	}
}

// TestFastFieldsStop checks where fastFields gives a block to readField:
// at the start of the first line it does not take, with r and the field
// state holding exactly the lines before it (a line field refuses is taken
// back out, so that readField refuses it once, from the same state).
func TestFastFieldsStop(t *testing.T) {
	for _, tt := range []struct {
		name, block string
		maxEnd      int // 0: the whole block
		stop        string
		headers     int
		host        string
	}{
		{"tab", "Host: a\r\nX: a\tb\r\n\r\n", 0, "X: a\tb", 1, "a"},
		{"duplicate Host", "Host: a\r\nhost: b\r\n\r\n", 0, "host: b", 1, "a"},
		{"bad Host first", "HOST: a b\r\n\r\n", 0, "HOST: a b", 0, ""},
		{"bad Content-Length", "Host: a\r\nContent-Length: 1x\r\n\r\n", 0, "Content-Length", 1, "a"},
		{"incomplete", "Host: a\r\nX: b", 0, "X: b", 1, "a"},
		{"no LF", "Host: a\r\nX: b\r", 0, "X: b\r", 1, "a"},
		{"beyond maxEnd", "Host: a\r\nX: bbbbbbbbbbbb\r\n\r\n", 20, "X: bbb", 1, "a"},
		{"folded", "Host: a\r\n b\r\n\r\n", 0, " b", 1, "a"},
		{"control byte", "Host: a\r\nX: \x01\r\n\r\n", 0, "X: \x01", 1, "a"},
		{"DEL late in a long value", "Host: a\r\nX: 0123456789abcdef\x7f\r\n\r\n", 0, "X: 0123", 1, "a"},
	} {
		b := []byte(tt.block)
		maxEnd := len(b)
		if tt.maxEnd > 0 {
			maxEnd = tt.maxEnd
		}
		var r Request
		r.reset()
		var f fieldState
		p, done := r.fastFields(b, 0, maxEnd, &f)
		if done || !bytes.HasPrefix(b[p:], []byte(tt.stop)) {
			t.Errorf("%s: stopped at %q (done %v), want at %q", tt.name, b[p:], done, tt.stop)
			continue
		}
		if r.NumHeaders != tt.headers || string(r.Host) != tt.host || r.ContentLength != -1 {
			t.Errorf("%s: %d headers, Host %q, Content-Length %d; want %d, %q, -1", tt.name, r.NumHeaders, r.Host, r.ContentLength, tt.headers, tt.host)
		}
	}
}

// TestKnownHostLine checks the Host lines around the one a Request
// remembers against the general parser: each parsed after a request whose
// Host was "127.0.0.1:8080" (or "a"), whether knownHostLine takes it or
// fastFields' walk does or the general parser has to.
func TestKnownHostLine(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 4096, MaxBodyBytes: 64}
	for _, host := range []string{"127.0.0.1:8080", "a"} {
		prime := []byte("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
		for _, line := range []string{
			"Host: " + host, "host: " + host, "HOST: " + host, "hOsT: " + host,
			"Host:" + host, "Host:  " + host, "Host: " + host + " ", "Host:\t" + host,
			"Host: " + host + "x", "Host: x" + host, "Host: " + host[:len(host)-1],
			"Hosts: " + host, "Hos: " + host, "Host; " + host, "Host " + host, "H\x00st: " + host,
			"Host: " + host + "\r\nHost: " + host, "X: y\r\nHost: " + host,
			"Host: " + host + "\n", "Host: " + host + "\rX",
		} {
			for _, b := range []string{
				"GET / HTTP/1.1\r\n" + line + "\r\n\r\n",
				"GET / HTTP/1.0\r\n" + line + "\r\nContent-Length: 2\r\n\r\nab",
			} {
				for cut := len(b); cut >= len(b)-12; cut-- {
					fast, slow := parseBoth([]byte(b[:cut]), prime, lim)
					if fast != slow {
						t.Errorf("%q after Host %q:\nfast:    %s\ngeneral: %s", b[:cut], host, fast, slow)
					}
				}
			}
		}
	}
	// The line is taken, and without a walk: a Request that remembers a
	// Host takes the same line with its name in another case, and stops
	// at nothing.
	var r Request
	b := []byte("hOST: 127.0.0.1:8080\r\n\r\n")
	r.validHostLen = copy(r.validHost[:], "127.0.0.1:8080")
	if next := r.knownHostLine(b, 0); next != len(b)-2 || string(r.Host) != "127.0.0.1:8080" || r.NumHeaders != 1 || string(r.Headers[0].Name) != "hOST" {
		t.Fatalf("knownHostLine: next %d, Host %q, %d headers", next, r.Host, r.NumHeaders)
	}
}

// TestKnownHost compares Host values of every length up to 20 with the
// one remembered, equal and differing in each single byte (the words of
// an 8- to 16-byte value overlap: every byte must still count).
func TestKnownHost(t *testing.T) {
	for n := range 21 {
		v := []byte("abcdefghijklmnopqrstu"[:n])
		var r Request
		r.validHostLen = copy(r.validHost[:], v)
		if !r.knownHost(v) {
			t.Errorf("%q: not known after it was remembered", v)
		}
		if r.knownHost(append(bytes.Clone(v), 'x')) || (n > 0 && r.knownHost(v[:n-1])) {
			t.Errorf("%q: a value one byte longer or shorter is known", v)
		}
		for i := range n {
			w := bytes.Clone(v)
			w[i] ^= 0x20
			if r.knownHost(w) {
				t.Errorf("%q known as %q (byte %d differs)", w, v, i)
			}
		}
	}
}
