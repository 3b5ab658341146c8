package metrics

import (
	"errors"
	"syscall"
	"testing"

	"github.com/hotpath-dev/hotpath/init/kernlog"
)

// kmsgRecords hands out /dev/kmsg records one per Read, then EAGAIN.
type kmsgRecords []string

func (r *kmsgRecords) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, syscall.EAGAIN
	}
	n := copy(p, (*r)[0])
	*r = (*r)[1:]
	return n, nil
}

// Every source is exported, zero included (so that rate() and alerts on
// a rise work from the first scrape); each scrape adds what the kernel
// logged since the one before; a failed read fails the collector.
func TestHardwareErrors(t *testing.T) {
	recs := &kmsgRecords{"0,1,10,-;mce: [Hardware Error]: CPU 1: Machine Check: 0 Bank 7: cc00008000010090\n"}
	c := kernlog.New(recs, kernlog.HardwareErrors)
	var readErr error
	reg := NewRegistry(Options{HardwareErrors: func() (kernlog.Snapshot, error) {
		if readErr != nil {
			return c.Snapshot(), readErr
		}
		err := c.Scan()
		return c.Snapshot(), err
	}})
	fams := scrape(t, reg)
	for src, want := range map[string]float64{"mce": 1, "ghes": 0, "aer": 0, "memory_failure": 0} {
		if v := value(t, fams, "hotpath_hardware_errors_total", "source", src); v != want {
			t.Errorf("%s = %v, want %v", src, v, want)
		}
	}
	*recs = kmsgRecords{
		"3,5,20,-;pcieport 0000:00:1c.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n",
	}
	fams = scrape(t, reg)
	if v := value(t, fams, "hotpath_hardware_errors_total", "source", "aer"); v != 1 {
		t.Errorf("aer = %v, want 1", v)
	}
	if v := value(t, fams, "hotpath_kernel_log_lost_records_total"); v != 3 {
		t.Errorf("lost = %v, want 3 (records 2-4)", v)
	}
	readErr = errors.New("read /dev/kmsg: broken")
	if v := value(t, scrape(t, reg), "hotpath_scrape_collector_success", "collector", "hardware_errors"); v != 0 {
		t.Errorf("collector success = %v after a failed read", v)
	}
}
