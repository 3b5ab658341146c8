package e2e

import (
	"errors"
	"fmt"
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// DropLine is what Linux 6.12's __dev_queue_xmit logs (rate-limited)
// when a noqueue device's transmit queue is stopped: the packet is
// dropped and counted in the device's tx_dropped.
const DropLine = "asks to queue packet!"

// TxDrops are the guest's transmit drop counts as its /metrics gives
// them: the device's tx_dropped and the drops of its root qdisc.
type TxDrops struct {
	TxDropped, QdiscDrops float64
	Qdisc                 string // the root qdisc's kind, "" when not exported
}

// ParseTxDrops reads TxDrops for device from a /metrics body. A body
// without the device's hotpath_netdev_tx_dropped_total is an error: a
// missing counter must not read as zero drops.
func ParseTxDrops(r io.Reader, device string) (TxDrops, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return TxDrops{}, fmt.Errorf("metrics: %w", err)
	}
	var d TxDrops
	found := false
	for _, m := range fams["hotpath_netdev_tx_dropped_total"].GetMetric() {
		if metricLabel(m, "device") == device {
			d.TxDropped, found = metricValue(m), true
		}
	}
	if !found {
		return d, fmt.Errorf("metrics: no hotpath_netdev_tx_dropped_total{device=%q}", device)
	}
	for _, m := range fams["hotpath_qdisc_drops_total"].GetMetric() {
		if metricLabel(m, "device") == device && metricLabel(m, "parent") == "root" {
			d.QdiscDrops, d.Qdisc = metricValue(m), metricLabel(m, "kind")
		}
	}
	if d.Qdisc == "" {
		return d, errors.New("metrics: no hotpath_qdisc_drops_total of the root qdisc")
	}
	return d, nil
}

func metricLabel(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func metricValue(m *dto.Metric) float64 {
	return m.GetCounter().GetValue() + m.GetUntyped().GetValue() + m.GetGauge().GetValue()
}

// CheckNoTxDrops is the check of the chosen step-8 default: no packet
// dropped on transmit since boot, by the device or its qdisc, and no drop
// line on the console.
func CheckNoTxDrops(d TxDrops, console string) []error {
	var errs []error
	if d.TxDropped != 0 {
		errs = append(errs, fmt.Errorf("tx_dropped %v, want 0", d.TxDropped))
	}
	if d.QdiscDrops != 0 {
		errs = append(errs, fmt.Errorf("root qdisc %s dropped %v, want 0", d.Qdisc, d.QdiscDrops))
	}
	if n := strings.Count(console, DropLine); n > 0 {
		errs = append(errs, fmt.Errorf("console: %d lines %q (a stopped queue under noqueue)", n, DropLine))
	}
	return errs
}
