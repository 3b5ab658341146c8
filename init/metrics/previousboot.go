package metrics

import (
	"github.com/hotpath-dev/hotpath/init/report"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	previousBootCrashed = prometheus.NewDesc(Namespace+"_previous_boot_crashed",
		"1 if the boot before this one ended in a kernel crash whose log pstore kept (reason: panic, oops, ...); "+
			"the log is in the boot report (previous_boot).", []string{"reason"}, nil)
	previousBootRecords = prometheus.NewDesc(Namespace+"_previous_boot_pstore_records",
		"pstore records the previous boot left (read and cleared at this boot).", nil, nil)
)

// previousBoot exports what a crashed previous boot left in pstore, so
// that an alert fires on a machine that rebooted from a panic and now
// looks healthy.
type previousBoot struct {
	read func() *report.PreviousBoot
}

func (c *previousBoot) collect(ch chan<- prometheus.Metric) error {
	pb := c.read()
	if pb == nil {
		return nil
	}
	ch <- prometheus.MustNewConstMetric(previousBootCrashed, prometheus.GaugeValue, b2f(pb.Crashed), pb.Reason)
	ch <- prometheus.MustNewConstMetric(previousBootRecords, prometheus.GaugeValue, float64(pb.Records))
	return nil
}
