//go:build goexperiment.jsonv2

package jsoncompare

import (
	jsonv2 "encoding/json/v2"
	"testing"
)

// encoding/json/v2 (Go 1.26, GOEXPERIMENT=jsonv2 only): Unmarshal into the
// reused struct, unknown members refused as the others are configured.
func BenchmarkDecodeScoreJSONv2(b *testing.B) {
	var r scoreRequest
	opts := jsonv2.RejectUnknownMembers(true)
	b.SetBytes(int64(len(scoreBody)))
	b.ReportAllocs()
	for b.Loop() {
		if err := jsonv2.Unmarshal(scoreBody, &r, opts); err != nil {
			b.Fatal(err)
		}
	}
}
