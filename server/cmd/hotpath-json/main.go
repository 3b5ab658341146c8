// Command hotpath-json is the default hotpath workload: the TechEmpower
// JSON (/json) and plaintext (/plaintext) endpoints on pinned per-CPU
// workers, and /large, a 32 KiB text body, for loads that fill the
// transmit path (bench-vm's step-8 comparison, the e2e tx-drop check).
//
// It reads HOTPATH_CPUS and HOTPATH_PORT (the init's workload contract);
// flags override them. It prints one line containing "ready" once every
// worker listens, and drains and exits 0 on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// message is the TechEmpower JSON test object. A fresh value is made per
// request and serialised per request, as the test's rules ask.
type message struct {
	Message string `json:"message"`
}

// AppendJSON encodes m with a value receiver, so server.WriteJSON keeps m
// on the stack. The object's shape is fixed, so its punctuation and its
// one member name are a constant, written as a generated encoder (easyjson
// and the like) writes them; the value is escaped afresh each time by
// jsonenc.AppendString. A jsonenc.Encoder, which checks separators and
// nesting as a value is built, cost 200 instructions more per request
// (380 against 180, cachegrind over an exact load), an eighth of the
// server's user-space work on a pipelined /json. TestMessageMatchesStdlib
// holds the output to encoding/json's.
func (m message) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"message":`...)
	dst = jsonenc.AppendString(dst, m.Message)
	return append(dst, '}')
}

func handleJSON(c *server.Ctx) {
	server.WriteJSON(c, message{Message: "Hello, World!"})
}

func handlePlaintext(c *server.Ctx) {
	c.Text("Hello, World!")
}

// LargeSize is the body size of /large: 32 KiB is 22 full-size segments
// at MTU 1500, several TSO super-packets per response, so that a few
// pipelined requests on many connections fill a transmit ring and its
// byte queue limit.
const LargeSize = 32 << 10

// large is /large's body, built once; Write copies it into the worker's
// buffer, so the route allocates nothing per request.
var large = func() []byte {
	b := make([]byte, LargeSize)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}()

func handleLarge(c *server.Ctx) {
	c.SetContentType("text/plain")
	c.Write(large)
}

// newServer registers the workload's routes; shared with the tests.
func newServer(cfg server.Config) *server.Server {
	s := server.New(cfg)
	s.Handle("GET", "/json", handleJSON)
	s.Handle("GET", "/plaintext", handlePlaintext)
	s.Handle("GET", "/large", handleLarge)
	return s
}

func main() {
	cfg, err := server.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotpath-json:", err)
		os.Exit(2)
	}
	cfg.RegisterFlags(flag.CommandLine)
	stats := flag.Bool("stats", false, "print requests and heap allocations per request on exit (benchmarks)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := newServer(cfg)

	var before runtime.MemStats
	var reqBefore uint64
	if *stats {
		go func() {
			<-s.Ready()
			reqBefore = s.Requests()
			runtime.ReadMemStats(&before)
		}()
	}
	if err := s.ListenAndServe(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hotpath-json:", err)
		os.Exit(1)
	}
	if *stats {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		reqs := s.Requests() - reqBefore
		mallocs := after.Mallocs - before.Mallocs
		per := 0.0
		if reqs > 0 {
			per = float64(mallocs) / float64(reqs)
		}
		fmt.Fprintf(os.Stderr, "hotpath: stats requests=%d mallocs=%d allocs_per_request=%.6f\n", reqs, mallocs, per)
	}
}
