package main

import (
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/supervise"
)

// TestLivenessOf: liveness.probe off, tcp, or an HTTP path.
func TestLivenessOf(t *testing.T) {
	for _, c := range []struct {
		probe string
		want  *supervise.Liveness
	}{
		{"off", nil},
		{"tcp", &supervise.Liveness{Interval: 10 * time.Second, Timeout: 2 * time.Second, Failures: 3}},
		{"/healthz", &supervise.Liveness{Path: "/healthz", Interval: 10 * time.Second, Timeout: 2 * time.Second, Failures: 3}},
	} {
		cfg := config.Default()
		cfg.Liveness.Probe = c.probe
		got := livenessOf(cfg)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: %+v, want %+v", c.probe, got, c.want)
		}
	}
}
