package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// DropLine is what Linux 6.12's __dev_queue_xmit logs (rate-limited)
// when a noqueue device's transmit queue is stopped: the packet is
// dropped and counted in the device's tx_dropped.
const DropLine = "asks to queue packet!"

// TxLoad is a load that fills the guest's transmit path: Conns
// connections at once, each sending Depth pipelined GET Path in one write
// and reading the Depth answers, again and again for Duration.
// hotpath-json's /large (32 KiB) on 64 connections, 8 deep, drove
// hundreds of tx drops a second under noqueue with 6.12's BQL (bench-vm's
// step-8 guests, README "Step 8").
type TxLoad struct {
	Conns, Depth int
	Path         string
	BodyLen      int // each answer's body length, checked
	Duration     time.Duration
}

// Run drives the load over dial and returns the answers read. Every
// connection's first error is returned (a reset, a short body, a
// timeout); an answer that is not 200 with BodyLen bytes is one.
func (l TxLoad) Run(ctx context.Context, dial DialFunc) (int, []error) {
	ctx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	req := strings.Repeat("GET "+l.Path+" HTTP/1.1\r\nHost: guest\r\n\r\n", l.Depth)
	var (
		mu    sync.Mutex
		total int
		errs  []error
		wg    sync.WaitGroup
	)
	for i := 0; i < l.Conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := l.conn(ctx, dial, req)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return total, errs
}

func (l TxLoad) conn(ctx context.Context, dial DialFunc, req string) (int, error) {
	c, err := dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	r := bufio.NewReaderSize(c, 64<<10)
	n := 0
	for ctx.Err() == nil {
		if _, err := io.WriteString(c, req); err != nil {
			return n, ignoreEnd(ctx, err)
		}
		for i := 0; i < l.Depth; i++ {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				return n, ignoreEnd(ctx, err)
			}
			m, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				return n, ignoreEnd(ctx, err)
			}
			if resp.StatusCode != 200 || m != int64(l.BodyLen) {
				return n, fmt.Errorf("GET %s: %d with %d bytes, want 200 with %d", l.Path, resp.StatusCode, m, l.BodyLen)
			}
			n++
		}
	}
	return n, nil
}

// ignoreEnd drops the error of a connection cut by the load's own end.
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

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
