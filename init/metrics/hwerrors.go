package metrics

import (
	"github.com/hotpath-dev/hotpath/init/kernlog"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	hardwareErrors = prometheus.NewDesc(Namespace+"_hardware_errors_total",
		"Hardware errors the kernel logged since boot, by source: mce (machine checks), ghes (firmware-reported, ACPI APEI), "+
			"aer (PCIe Advanced Error Reporting), memory_failure (pages taken away after an uncorrected error). "+
			"Any rise is a machine to drain; the lines are in the kernel log and the boot report (hardware_errors).",
		[]string{"source"}, nil)
	kernelLogLost = prometheus.NewDesc(Namespace+"_kernel_log_lost_records_total",
		"Kernel log records overwritten before the hardware-error counter read them (an error among them is not counted).", nil, nil)
)

// hwErrors exports the hardware-error counts of the kernel log; each
// scrape reads the records logged since the last one (kernlog.Counter.Scan).
type hwErrors struct {
	read func() (kernlog.Snapshot, error)
}

func (c *hwErrors) collect(ch chan<- prometheus.Metric) error {
	s, err := c.read()
	for _, n := range s.Counts {
		ch <- prometheus.MustNewConstMetric(hardwareErrors, prometheus.CounterValue, float64(n.N), n.Class)
	}
	ch <- prometheus.MustNewConstMetric(kernelLogLost, prometheus.CounterValue, float64(s.Lost))
	return err
}
