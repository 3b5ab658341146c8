package server

import "testing"

func TestFDTableTarget(t *testing.T) {
	const per = 16384 + 1024 + 4 // the default MaxConnsPerWorker's fdsPerWorker
	for _, tc := range []struct {
		workers, maxConns int
		limit             uint64
		want              int
		capped            bool
	}{
		{4, 16384, 1 << 20, 4*per + 256, false},
		{1, 2000, 20000, 2000 + 1024 + 4 + 256, false},
		// The limit below what the workers may hold: the limit, said.
		{2, 16384, 20000, 20000, true},
		// Below the workers' need plus the reserve only: no warning.
		{1, 16384, per + 100, per + 100, false},
		// The appliance's 2^20: 64 workers hold their connections (not
		// all the lingering refused ones), 65 do not.
		{64, 16384, 1 << 20, 1 << 20, false},
		{65, 16384, 1 << 20, 1 << 20, true},
	} {
		n, capped := fdTableTarget(tc.workers, tc.maxConns, tc.limit)
		if n != tc.want || capped != tc.capped {
			t.Errorf("fdTableTarget(%d, %d, %d) = %d, %v; want %d, %v", tc.workers, tc.maxConns, tc.limit, n, capped, tc.want, tc.capped)
		}
	}
}
