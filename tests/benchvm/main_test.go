package main

import "testing"

func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      float64
		ok        bool
	}{
		{"ok", "Running 10s test @ http://10.77.0.2:8080/json\n  2 threads and 64 connections\n" +
			"  1000 requests in 10.00s, 150.00KB read\nRequests/sec:    100.25\nTransfer/sec:     15.00KB\n", 100.25, true},
		{"errors", "Non-2xx or 3xx responses: 12\nRequests/sec:    100.25\n", 0, false},
		{"no figure", "unable to connect to 10.77.0.2:8080 Connection refused\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk([]byte(tc.out))
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseWrk = %v, %v; want %v, ok=%v", got, err, tc.want, tc.ok)
			}
		})
	}
}
