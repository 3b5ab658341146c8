package cpulist

import (
	"slices"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		out  string // Format(want)
	}{
		{"0", []int{0}, "0"},
		{"0-3", []int{0, 1, 2, 3}, "0-3"},
		{"0,2,4-5\n", []int{0, 2, 4, 5}, "0,2,4-5"},
		{" 0 - 1 , 3 ", []int{0, 1, 3}, "0-1,3"},
		// The order is kept: NIC queue i goes to the i-th CPU.
		{"4-7,0-3", []int{4, 5, 6, 7, 0, 1, 2, 3}, "4-7,0-3"},
		{"3,2,1,0", []int{3, 2, 1, 0}, "3,2,1,0"},
		{"2,0-1", []int{2, 0, 1}, "2,0-1"},
		{"1,2,3", []int{1, 2, 3}, "1-3"},
		{"65535", []int{65535}, "65535"},
		{"", nil, ""},
	} {
		got, err := Parse(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		s := Format(got)
		if s != tc.out {
			t.Errorf("Format(%v) = %q, want %q", got, s, tc.out)
		}
		if back, err := Parse(s); err != nil || !slices.Equal(back, got) {
			t.Errorf("Parse(Format(%v)) = %v, %v", got, back, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"a", "3-1", "-1", "1,,2", ",", "1-", "0-3,2", "1,1", "3,1-2,1", "65536", "0-65536", "0-999999999",
	} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,6", "4-7,0-3", "1,1", "0-65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		if back, err := Parse(Format(l)); err != nil || !slices.Equal(back, l) {
			t.Fatalf("Parse(%q) = %v; Parse(Format) = %v, %v", s, l, back, err)
		}
	})
}
