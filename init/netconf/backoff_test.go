package netconf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

func TestScheduleTimeout(t *testing.T) {
	for _, tc := range []struct {
		s    Schedule
		want string
	}{
		{Schedule{First: time.Second, Max: 5 * time.Second}, "[1s 2s 4s 5s 5s 5s]"},
		{Schedule{First: 2 * time.Second, Max: time.Second}, "[1s 1s 1s 1s 1s 1s]"},
		{Schedule{First: 5 * time.Second}, "[5s 10s 20s 40s 1m20s 2m40s]"}, // the library's own, uncapped
		{Schedule{Max: 3 * time.Second}, "[1s 2s 3s 3s 3s 3s]"},
	} {
		var got []time.Duration
		for i := range 6 {
			got = append(got, tc.s.Timeout(i))
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%+v: %v, want %s", tc.s, got, tc.want)
		}
	}
}

// TestRetry: exchanges until one succeeds, the tries run out, or the
// deadline; the error says which and lists the timeouts.
func TestRetry(t *testing.T) {
	s := Schedule{First: 10 * time.Millisecond, Max: 20 * time.Millisecond, Tries: 4}
	var timeouts []time.Duration
	n, err := Retry(context.Background(), s, func(_ context.Context, to time.Duration) error {
		timeouts = append(timeouts, to)
		if len(timeouts) == 3 {
			return nil
		}
		return errors.New("no answer")
	})
	if n != 3 || err != nil || fmt.Sprint(timeouts) != "[10ms 20ms 20ms]" {
		t.Errorf("succeeds on the third: %d, %v, timeouts %v", n, err, timeouts)
	}
	n, err = Retry(context.Background(), s, func(context.Context, time.Duration) error { return errors.New("no answer") })
	if n != 4 || err == nil || !strings.Contains(err.Error(), "4 exchanges (timeouts 10ms,20ms,20ms,20ms): no answer") {
		t.Errorf("never answered: %d, %v", n, err)
	}
	// Until the deadline, each exchange waiting out its timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	n, err = Retry(ctx, Schedule{First: 10 * time.Millisecond, Max: 40 * time.Millisecond}, func(ctx context.Context, to time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(to):
			return errors.New("timeout")
		}
	})
	if took := time.Since(start); took > time.Second || err == nil || !strings.Contains(err.Error(), "network deadline reached") || n < 3 {
		t.Errorf("with a deadline: %d exchanges in %v, %v", n, took, err)
	}
}

// TestDHCPBackoffCap: with no server, six exchanges of 300 ms capped at
// 300 ms take about 1.8 s; the library's own retries (its timeout doubled
// each time) would take 300 ms × 63 = 18.9 s.
func TestDHCPBackoffCap(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	srv := startSilentServer(t, srvNS, srvIf)
	res, _ := runChild(t, cliNS, "cap", cliIf)
	if res.Step.Status != report.Failed || !strings.Contains(res.Step.Error, "6 exchanges") {
		t.Fatalf("step without an answering server: %+v", res.Step)
	}
	const sum = 6 * 300 // ms, the capped schedule
	if res.Step.Millis < sum || res.Step.Millis > sum+4000 {
		t.Errorf("6 capped exchanges took %.0f ms, want %d ms and little more (uncapped: 18900 ms)", res.Step.Millis, sum)
	}
	if n := srv.requests.Load(); n < 6 {
		t.Errorf("the server saw %d DISCOVERs, want one per exchange (6)", n)
	}
}

// TestDHCPDeadline is the boot without a DHCP server: the step fails at
// the network deadline (1.5 s here) with that reason, however many
// exchanges were allowed, so the workload starts; the background attempts
// then take the lease once a server appears.
func TestDHCPDeadline(t *testing.T) {
	srvNS, cliNS, srvIf, cliIf := netnsPair(t)
	run(t, "ip", "-n", srvNS, "link", "set", srvIf, "up")
	var srv *dhcpServer
	res, outside := runChildWatch(t, cliNS, "deadline", cliIf, func(line string) {
		rest, ok := strings.CutPrefix(line, "STEP ")
		if !ok {
			return
		}
		status, rest, _ := strings.Cut(rest, " ")
		ms, why, _ := strings.Cut(rest, " ")
		if status != "failed" || !strings.Contains(why, "network deadline reached") {
			t.Errorf("boot step without a server: %s %s", status, why)
		}
		if v, _ := strconv.ParseFloat(ms, 64); v < 1500 || v > 3000 {
			t.Errorf("boot step took %s ms, want the 1500 ms deadline and little more", ms)
		}
		srv = startServer(t, srvNS, srvIf, net.IPv4(10, 77, 0, 44))
	})
	if srv == nil {
		t.Fatal("the child never reported its boot step")
	}
	if res.Step.Status != report.Applied || res.Step.Detail["address"] != "10.77.0.44/24" {
		t.Fatalf("background retry: %+v", res.Step)
	}
	if res.Packets != 0 || outside != 0 {
		t.Errorf("AF_PACKET sockets after the background lease: %d/%d", res.Packets, outside)
	}
	checkInstalled(t, cliNS, cliIf, "10.77.0.44/24", "10.77.0.1", 1400)
}
