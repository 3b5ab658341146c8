package metrics

import (
	"testing"

	"github.com/hotpath-dev/hotpath/init/report"
)

// A boot after a panic says so in its metrics; one after a clean boot
// says 0; before the boot report there is nothing to say.
func TestPreviousBoot(t *testing.T) {
	var pb *report.PreviousBoot
	reg := NewRegistry(Options{PreviousBoot: func() *report.PreviousBoot { return pb }})
	if fams := scrape(t, reg); fams["hotpath_previous_boot_crashed"] != nil {
		t.Errorf("metric before the report: %v", fams["hotpath_previous_boot_crashed"])
	}
	pb = &report.PreviousBoot{Crashed: true, Reason: "panic", Records: 3}
	fams := scrape(t, reg)
	if v := value(t, fams, "hotpath_previous_boot_crashed", "reason", "panic"); v != 1 {
		t.Errorf("crashed{panic} = %v, want 1", v)
	}
	if v := value(t, fams, "hotpath_previous_boot_pstore_records"); v != 3 {
		t.Errorf("records = %v, want 3", v)
	}
	pb = &report.PreviousBoot{}
	if v := value(t, scrape(t, reg), "hotpath_previous_boot_crashed", "reason", ""); v != 0 {
		t.Errorf("crashed after a clean boot = %v, want 0", v)
	}
}
