package e2e

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/report"
)

// exiterPkg is the test workload: /json, and GET /exit exits with status 3.
const exiterPkg = "github.com/hotpath-dev/hotpath/tests/workloads/exiter"

// TestSupervision ships the test's own workload in an image (a user's
// workload, built from outside the server package), makes it exit, and
// checks that the init reports the exit, restarts it, and that it serves
// again; then that power off delivers SIGTERM to it.
func TestSupervision(t *testing.T) {
	requireE2E(t)
	disk := buildImage(t, exiterPkg)
	b := boot(t, disk, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := b.Netns.HTTPClient(30 * time.Second)
	base := "http://" + b.Addr + ":" + b.port
	if err := CheckGet(ctx, b.dial, Expect{"/json", "application/json", JSON.Body}); err != nil {
		t.Fatalf("exiter before exit: %v", err)
	}
	start, _, err := b.Console.WaitEvent(ctx, 0, report.EventStart)
	if err != nil {
		t.Fatal(err)
	}

	mark := b.Console.Len()
	resp, err := client.Get(base + "/exit")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "status 3") {
		t.Fatalf("/exit answered %q", body)
	}
	exit, _, err := b.Console.WaitEvent(ctx, mark, report.EventExit)
	if err != nil {
		t.Fatal(err)
	}
	if exit.PID != start.PID || exit.Detail != "exit status 3" {
		t.Errorf("exit event %+v, want pid %d with status 3", exit, start.PID)
	}
	restart, _, err := b.Console.WaitEvent(ctx, mark, report.EventRestart)
	if err != nil {
		t.Fatal(err)
	}
	if restart.BackoffMS <= 0 {
		t.Errorf("restart event without a back-off: %+v", restart)
	}
	again, _, err := b.Console.WaitEvent(ctx, mark, report.EventStart)
	if err != nil {
		t.Fatal(err)
	}
	if again.PID == start.PID || again.PID == 0 {
		t.Errorf("restarted workload pid %d, first was %d", again.PID, start.PID)
	}
	// It serves again, once it listens.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := CheckGet(ctx, b.dial, Expect{"/json", "application/json", JSON.Body})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted workload does not serve: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// No crash loop among the events since the exit, which must hold the
	// restart waited for above (an absence check over nothing passes).
	evs, err := b.Console.Events(mark)
	if err != nil {
		t.Errorf("the console's events since the exit: %v", err)
	}
	if !slices.ContainsFunc(evs, func(ev report.Event) bool { return ev.Kind == report.EventRestart }) {
		t.Errorf("the console's events since the exit lack the restart: %+v", evs)
	}
	for _, ev := range evs {
		if ev.Kind == report.EventCrashLoop {
			t.Errorf("one requested exit reported as a crash loop: %+v", ev)
		}
	}
	t.Run("shutdown", func(t *testing.T) { checkShutdown(t, b, "exiter: SIGTERM") })
}
