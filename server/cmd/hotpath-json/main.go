// Command hotpath-json is the default hotpath workload: the TechEmpower
// JSON (/json) and plaintext (/plaintext) endpoints on pinned per-CPU
// workers.
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
// request and serialised by the jsonenc encoder, as the test's rules ask.
type message struct {
	Message string `json:"message"`
}

// nameMessage is the member name, encoded once: the name is the type's,
// the same in every value; the value is encoded afresh per request.
var nameMessage = jsonenc.NewName("message")

// AppendJSON encodes m with a value receiver, so server.WriteJSON keeps m
// on the stack.
func (m message) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Name(nameMessage)
	e.String(m.Message)
	e.EndObject()
	return e.Bytes()
}

func handleJSON(c *server.Ctx) {
	server.WriteJSON(c, message{Message: "Hello, World!"})
}

func handlePlaintext(c *server.Ctx) {
	c.Text("Hello, World!")
}

// newServer registers the workload's routes; shared with the tests.
func newServer(cfg server.Config) *server.Server {
	s := server.New(cfg)
	s.Handle("GET", "/json", handleJSON)
	s.Handle("GET", "/plaintext", handlePlaintext)
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
