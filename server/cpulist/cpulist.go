// Package cpulist parses and formats the CPU list of the workload
// contract (HOTPATH_CPUS, the init's workload.cpus): the kernel's list
// format ("0-3,6"), read as an ordered list.
//
// The order is meaningful: the server creates its listeners in list order,
// which makes the i-th CPU the socket index the reuseport program returns
// for it, and the init routes NIC queue i to the i-th CPU. So Parse keeps
// the order as written and refuses a CPU listed twice (it would be two
// workers on one CPU), and Format writes the list back in the same order,
// so that Parse(Format(l)) is l. A list the kernel prints (sorted, no
// duplicates) reads the same either way.
//
// It is the one implementation of the format: the server (a library that
// must not import the init) and the init both use it.
package cpulist

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU numbers Parse accepts (the kernel's NR_CPUS is at
// most 8192; the bound only keeps a hostile range such as 0-999999999
// from allocating).
const MaxCPU = 1<<16 - 1

// Parse parses a CPU list such as "0-3,6" or "4-7,0-3". Whitespace around
// the list and around each number is ignored; an empty list is the empty
// set (nil). The CPUs come out in the order written, ranges ascending; a
// CPU given twice, a descending range, an empty item or a CPU above MaxCPU
// is an error.
func Parse(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	var seen [(MaxCPU + 1) / 64]uint64
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		if b > MaxCPU {
			return nil, fmt.Errorf("cpu list %q: cpu %d out of range (at most %d)", s, b, MaxCPU)
		}
		for c := a; c <= b; c++ {
			if seen[c/64]&(1<<(c%64)) != 0 {
				return nil, fmt.Errorf("cpu list %q: cpu %d twice", s, c)
			}
			seen[c/64] |= 1 << (c % 64)
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Format writes cpus in their order, each run of consecutive ascending
// CPUs as a range: [0 1 2 3 6] is "0-3,6", [4 5 6 7 0 1 2 3] "4-7,0-3",
// [3 2] "3,2". Parse(Format(l)) is l for any list Parse accepts.
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
