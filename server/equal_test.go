package server

import "testing"

// TestEqualShort compares equalShort with string comparison for every
// length up to 20, equal and differing in each single byte (its words
// overlap: every byte must still count), and of different lengths.
func TestEqualShort(t *testing.T) {
	const s = "abcdefghijklmnopqrstu"
	for n := range 21 {
		v := s[:n]
		if !equalShort([]byte(v), v) {
			t.Errorf("%q: not equal to itself", v)
		}
		if equalShort([]byte(v), s[:n+1]) || (n > 0 && equalShort([]byte(v[:n-1]), v)) {
			t.Errorf("%q: equal to a string one byte longer or shorter", v)
		}
		for i := range n {
			b := []byte(v)
			b[i] ^= 0x20
			if equalShort(b, v) {
				t.Errorf("%q equal to %q (byte %d differs)", b, v, i)
			}
		}
	}
}

// TestJSONHeadCached checks that a WriteJSON response takes the cached
// head (appendResponse's first case: headJSONLen follows the body's
// length), and that the same Content-Type set as another string with
// the same bytes gives the same response by the general path.
func TestJSONHeadCached(t *testing.T) {
	w, c := newTestWorker(t)
	w.srv.Handle("GET", "/set", func(c *Ctx) {
		c.SetContentType(string([]byte("application/json"))) // not the constant's bytes
		c.WriteString(`{"message":"Hello, World!"}`)
	})
	c.in = append(c.in, "GET /json HTTP/1.1\r\nHost: a\r\n\r\n"...)
	viaJSON := string(w.respond(c))
	if w.headJSONLen != len(`{"message":"Hello, World!"}`) {
		t.Errorf("headJSONLen %d after a WriteJSON response: the cached head was not used", w.headJSONLen)
	}
	w.headJSONLen = -1
	c.in = append(c.in[:0], "GET /set HTTP/1.1\r\nHost: a\r\n\r\n"...)
	viaSet := string(w.respond(c))
	if w.headJSONLen != -1 {
		t.Errorf("headJSONLen %d: SetContentType's string took the cached head", w.headJSONLen)
	}
	if viaJSON != viaSet {
		t.Errorf("WriteJSON:\n%q\nSetContentType:\n%q", viaJSON, viaSet)
	}
}
