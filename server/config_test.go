package server

import (
	"flag"
	"slices"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"0-3", []int{0, 1, 2, 3}, true},
		{"0,2", []int{0, 2}, true},
		{"3,1", []int{3, 1}, true},
		{" 0-1,4-5\n", []int{0, 1, 4, 5}, true},
		{"", nil, false},
		{"a", nil, false},
		{"1-0", nil, false},
		{"-1", nil, false},
		{"0,0", nil, false},
		{"0-2,1", nil, false},
		{"4-7,0-3", []int{4, 5, 6, 7, 0, 1, 2, 3}, true},
		{"65536", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if (err == nil) != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestConfigFromEnvAndFlags(t *testing.T) {
	env := map[string]string{"HOTPATH_CPUS": "0,2", "HOTPATH_PORT": "9000"}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.CPUs, []int{0, 2}) || c.Port != 9000 {
		t.Fatalf("from env: cpus %v port %d", c.CPUs, c.Port)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-cpus", "1", "-port", "81", "-busy-poll", "50"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.CPUs, []int{1}) || c.Port != 81 || c.BusyPoll != 50 {
		t.Errorf("flags did not override: %+v", c)
	}
	// The init's step-10 variable turns the epoll preference on; the flag
	// still turns it off.
	env["HOTPATH_PREFER_BUSY_POLL"] = "1"
	if c, err = ConfigFromEnv(func(k string) string { return env[k] }); err != nil || !c.PreferBusyPoll {
		t.Errorf("HOTPATH_PREFER_BUSY_POLL=1: prefer %v, %v", c.PreferBusyPoll, err)
	}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"-prefer-busy-poll=false"}); err != nil || c.PreferBusyPoll {
		t.Errorf("-prefer-busy-poll=false after HOTPATH_PREFER_BUSY_POLL=1: prefer %v, %v", c.PreferBusyPoll, err)
	}
	if d := DefaultConfig(); d.PreferBusyPoll {
		t.Error("the library prefers busy polling without being asked")
	}
	for _, bad := range []map[string]string{{"HOTPATH_CPUS": "x"}, {"HOTPATH_PORT": "70000"}, {"HOTPATH_PREFER_BUSY_POLL": "maybe"}} {
		if _, err := ConfigFromEnv(func(k string) string { return bad[k] }); err == nil {
			t.Errorf("ConfigFromEnv(%v) succeeded", bad)
		}
	}
}
