package cpuset

import (
	"slices"
	"testing"
)

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		nr   int
		want string
	}{
		{[]int{0}, 1, "1"},
		{[]int{1}, 2, "2"},
		{[]int{3}, 4, "8"},
		{[]int{0, 1, 2, 3}, 4, "f"},
		{[]int{7}, 8, "80"},
		{[]int{}, 8, "00"},
		{[]int{31}, 32, "80000000"},
		{[]int{32}, 36, "1,00000000"},
		{[]int{0}, 64, "00000000,00000001"},
		{[]int{33}, 64, "00000002,00000000"},
		{[]int{63}, 64, "80000000,00000000"},
		{[]int{64}, 65, "1,00000000,00000000"},
		{[]int{5}, 2, "20"}, // nr raised to cover the CPU
	} {
		got := FormatMask(tc.cpus, tc.nr)
		if got != tc.want {
			t.Errorf("FormatMask(%v, %d) = %q, want %q", tc.cpus, tc.nr, got, tc.want)
		}
		back, err := ParseMask(got)
		if err != nil {
			t.Errorf("ParseMask(%q): %v", got, err)
		}
		if len(tc.cpus) == 0 {
			tc.cpus = nil
		}
		if !slices.Equal(back, tc.cpus) {
			t.Errorf("ParseMask(%q) = %v, want %v", got, back, tc.cpus)
		}
	}
	if _, err := ParseMask("123456789"); err == nil {
		t.Error("ParseMask accepted a 36-bit group")
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		out  string
	}{
		{"0", []int{0}, "0"},
		{"0-3", []int{0, 1, 2, 3}, "0-3"},
		{"0,2,4-5\n", []int{0, 2, 4, 5}, "0,2,4-5"},
		{"3,1-2", []int{3, 1, 2}, "3,1-2"},
		{"4-7,0-3", []int{4, 5, 6, 7, 0, 1, 2, 3}, "4-7,0-3"},
		{"", nil, ""},
	} {
		got, err := ParseList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if s := FormatList(got); s != tc.out {
			t.Errorf("FormatList(%v) = %q, want %q", got, s, tc.out)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1,,2", "3,1-2,1", "0-3,2"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) succeeded", bad)
		}
	}
}
