package ami

import (
	"fmt"
	"time"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
	"github.com/hotpath-dev/hotpath/packer/ebsupload"
)

// progress turns upload counters into a UI line at most every `every`:
// blocks done of total, throughput of the bytes written, and an ETA from
// the share of blocks done so far. ebsupload serialises the calls.
type progress struct {
	ui    packersdk.Ui
	every time.Duration
	last  time.Time
	p     ebsupload.Progress
}

func newProgress(ui packersdk.Ui, every time.Duration) *progress {
	if every <= 0 {
		every = 5 * time.Second
	}
	return &progress{ui: ui, every: every, last: time.Now()}
}

func (p *progress) update(pr ebsupload.Progress) {
	p.p = pr
	if time.Since(p.last) < p.every || pr.Done == pr.Total {
		return
	}
	p.last = time.Now()
	p.ui.Say(formatProgress(pr))
}

func (p *progress) final() {
	if p.p.Total > 0 {
		p.ui.Say(formatProgress(p.p))
	}
}

func formatProgress(p ebsupload.Progress) string {
	pct := 100 * float64(p.Done) / float64(max(p.Total, 1))
	rate := 0.0
	if s := p.Elapsed.Seconds(); s > 0 {
		rate = float64(p.BytesSent) / (1 << 20) / s
	}
	eta := "-"
	if p.Done > 0 && p.Done < p.Total {
		left := time.Duration(float64(p.Elapsed) * float64(p.Total-p.Done) / float64(p.Done))
		eta = left.Round(time.Second).String()
	} else if p.Done == p.Total {
		eta = "0s"
	}
	return fmt.Sprintf("blocks %d/%d (%.1f%%), %d written, %.1f MiB/s, ETA %s",
		p.Done, p.Total, pct, p.Sent, rate, eta)
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
