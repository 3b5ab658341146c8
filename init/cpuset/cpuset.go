// Package cpuset converts between the kernel's two spellings of a CPU set:
// the list format ("0-3,6", used by HOTPATH_CPUS, smp_affinity_list and
// /sys/devices/system/cpu/online) and the hex mask format ("f" or, beyond 32
// CPUs, "00000001,00000000" with a comma every 32 bits, used by xps_cpus and
// rps_cpus).
//
// It is hand-written rather than taken from a library because the mask
// format has a kernel-specific width rule (bitmap_print_to_pagebuf with
// nr_cpu_ids bits) that the verify steps must reproduce exactly.
package cpuset

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/server/cpulist"
)

// ParseList parses a CPU list such as "0-3,6". It is cpulist.Parse, the
// one reading of the format that the server shares: whitespace around it
// is ignored, an empty string is the empty set, the order is kept (NIC
// queue i goes to the i-th CPU of workload.cpus), and a CPU listed twice
// is an error. The lists the kernel prints are sorted, so Online and
// Possible come out sorted.
func ParseList(s string) ([]int, error) { return cpulist.Parse(s) }

// FormatList renders cpus as a list with ranges, in their order: "0-3,6",
// "4-7,0-3". It is cpulist.Format; ParseList(FormatList(l)) is l.
func FormatList(cpus []int) string { return cpulist.Format(cpus) }

// FormatMask renders cpus as the kernel prints a cpumask of nrCPUs bits
// (nr_cpu_ids): hex, most significant first, exactly ceil(nrCPUs/4) digits,
// a comma between 32-bit groups. For nrCPUs 4 and CPU 1: "2"; for 64 and
// CPU 32: "00000001,00000000". nrCPUs is raised to cover the largest CPU.
// The kernel accepts this format on write, whatever the width.
func FormatMask(cpus []int, nrCPUs int) string {
	for _, c := range cpus {
		if c+1 > nrCPUs {
			nrCPUs = c + 1
		}
	}
	if nrCPUs < 1 {
		nrCPUs = 1
	}
	words := make([]uint32, (nrCPUs+31)/32)
	for _, c := range cpus {
		words[c/32] |= 1 << (c % 32)
	}
	var b strings.Builder
	for i := len(words) - 1; i >= 0; i-- {
		width := 8
		if i == len(words)-1 {
			width = (nrCPUs - 32*i + 3) / 4
		}
		fmt.Fprintf(&b, "%0*x", width, words[i])
		if i > 0 {
			b.WriteByte(',')
		}
	}
	return b.String()
}

// ParseMask parses a hex mask with optional commas between 32-bit groups
// ("f", "00000001,00000000") into a sorted CPU list.
func ParseMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("cpu mask: empty")
	}
	groups := strings.Split(s, ",")
	var cpus []int
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		if len(g) == 0 || len(g) > 8 {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		w, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: %w", s, err)
		}
		base := 32 * (len(groups) - 1 - gi)
		for bit := 0; bit < 32; bit++ {
			if w&(1<<bit) != 0 {
				cpus = append(cpus, base+bit)
			}
		}
	}
	slices.Sort(cpus)
	return cpus, nil
}

// Online returns the online CPUs from sysRoot/devices/system/cpu/online.
func Online(sysRoot string) ([]int, error) {
	return readList(sysRoot, "online")
}

// Possible returns nr_cpu_ids, the width of the kernel's CPU masks, from
// sysRoot/devices/system/cpu/possible (the largest possible CPU plus one).
func Possible(sysRoot string) (int, error) {
	cpus, err := readList(sysRoot, "possible")
	if err != nil {
		return 0, err
	}
	if len(cpus) == 0 {
		return 0, fmt.Errorf("cpuset: no possible cpus")
	}
	return cpus[len(cpus)-1] + 1, nil
}

func readList(sysRoot, name string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(sysRoot, "devices/system/cpu", name))
	if err != nil {
		return nil, fmt.Errorf("cpuset: %w", err)
	}
	return ParseList(string(b))
}
