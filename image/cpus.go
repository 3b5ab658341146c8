package image

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hotpath-dev/hotpath/init/config"
	"github.com/hotpath-dev/hotpath/init/cpuset"
)

// checkCPUs refuses a workload.cpus list that no machine booting this
// image can give: a CPU at or above the kernel's CONFIG_NR_CPUS (nrCPUs;
// 0 when not known yet), or at or above an nr_cpus= or maxcpus= limit on
// the command line. How many vCPUs an instance has is not known at build
// time; the init intersects the list with the online CPUs at boot and
// reports what it dropped.
func checkCPUs(cpus, cmdline string, nrCPUs int) error {
	if cpus == "" || cpus == "all" {
		return nil
	}
	list, err := cpuset.ParseList(cpus)
	if err != nil || len(list) == 0 {
		return fmt.Errorf("workload.cpus=%q: %v", cpus, err)
	}
	top := slices.Max(list) // the list is in workload order, not sorted
	if nrCPUs > 0 && top >= nrCPUs {
		return fmt.Errorf("workload.cpus=%s: cpu %d does not exist on any machine: the kernel supports %d cpus (CONFIG_NR_CPUS)", cpus, top, nrCPUs)
	}
	for _, w := range config.SplitCmdline(cmdline) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || (k != "nr_cpus" && k != "maxcpus") {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			continue
		}
		if top >= n {
			return fmt.Errorf("workload.cpus=%s: cpu %d is never online with %s on the command line", cpus, top, w)
		}
	}
	return nil
}

// kernelNRCPUs reads CONFIG_NR_CPUS from a kernel .config; 0 if absent.
func kernelNRCPUs(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_NR_CPUS="); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, sc.Err()
}
