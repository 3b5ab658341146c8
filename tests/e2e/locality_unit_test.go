package e2e

import "testing"

func TestParseAccepts(t *testing.T) {
	m, err := parseAccepts("cpu=0 accepted=12 foreign=0\ncpu=1 accepted=30 foreign=2\n")
	if err != nil || len(m) != 2 || m[0] != (workerAccepts{12, 0}) || m[1] != (workerAccepts{30, 2}) {
		t.Errorf("%v, %v", m, err)
	}
	for _, bad := range []string{"", "cpu=0 accepted=1\n", "worker=0 running=0 incoming=0\n"} {
		if _, err := parseAccepts(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
