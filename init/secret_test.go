package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotpath-dev/hotpath/init/mgmt"
)

const (
	secretToken = "s3cr3t-T0KEN"
	secretPass  = "hunter2-PASS"
)

// TestReportSecrets: the boot report, as printed on the console and as
// /report serves it over a real socket, carries no value of workload.env
// or workload.args (from init.conf or the kernel command line) by
// default; report.secrets=show puts them in both.
func TestReportSecrets(t *testing.T) {
	for _, tc := range []struct {
		show string
		want bool // secrets in the output
	}{{"redact", false}, {"show", true}} {
		t.Run(tc.show, func(t *testing.T) {
			m, out := testMachine(t, t.TempDir(), map[string]string{
				"workload.env":   "API_TOKEN=" + secretToken + " MODE=fast",
				"workload.args":  "-v --password=" + secretPass,
				"report.secrets": tc.show,
			})
			cmdline := `console=ttyS0 hotpath.workload.env="API_TOKEN=` + secretToken + `" hotpath.workload.args=` + secretPass + "\n"
			if err := os.WriteFile(filepath.Join(m.procRoot, "cmdline"), []byte(cmdline), 0o644); err != nil {
				t.Fatal(err)
			}
			m.obs = startObserver(m.con, m.cfg, nil)
			newBootReport(m, "0", nil).finish(m, &crngState{}, nil)

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- mgmt.Serve(ctx, ln, mgmt.Handler(mgmt.Options{Report: m.obs.bootReport}), mgmt.DefaultLimits, nil)
			}()
			defer func() { cancel(); <-done }()
			c := &http.Client{Timeout: 5 * time.Second}
			resp, err := c.Get("http://" + ln.Addr().String() + "/report")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(body), "API_TOKEN") {
				t.Fatalf("/report: %d %.200s", resp.StatusCode, body)
			}
			for what, s := range map[string]string{"console": out.String(), "/report": string(body)} {
				for _, secret := range []string{secretToken, secretPass} {
					if got := strings.Contains(s, secret); got != tc.want {
						t.Errorf("report.secrets=%s: %s carries %s: %v, want %v", tc.show, what, secret, got, tc.want)
					}
				}
			}
			if !strings.Contains(out.String(), "HOTPATH-REPORT") {
				t.Errorf("no report on the console: %.300s", out.String())
			}
		})
	}
}
