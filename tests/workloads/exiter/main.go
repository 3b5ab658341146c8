// Command exiter is the end-to-end tests' own workload: it serves /json like
// the default workload and exits with status 3 when asked (GET /exit), so a
// test can watch the init restart it; GET /stop stops the whole process
// (SIGSTOP to itself) so a test can watch the init find a hung workload:
// the kernel still completes handshakes on its port, nothing answers. It is written the way a user writes a
// workload, on the server library from outside the server package, so an
// image built from it also proves that a user's own workload ships.
//
// It follows the workload contract through the library's default
// configuration (HOTPATH_PORT, HOTPATH_CPUS, the "ready" line), and on
// SIGTERM prints "exiter: SIGTERM" (the test's proof that the signal
// arrived), drains and exits 0.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// ExitStatus is what GET /exit exits with.
const ExitStatus = 3

type message struct{ Message string }

func (m message) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("message")
	e.String(m.Message)
	e.EndObject()
	return e.Bytes()
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("exiter: ")
	cfg, err := server.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	cfg.RegisterFlags(flag.CommandLine)
	flag.Parse()

	exit := make(chan struct{}, 1)
	s := server.New(cfg)
	s.Handle("GET", "/json", func(c *server.Ctx) {
		server.WriteJSON(c, message{Message: "Hello, World!"})
	})
	s.Handle("GET", "/exit", func(c *server.Ctx) {
		c.Close()
		c.Text("exiting with status 3\n")
		// Handlers must not block: the exit happens on another goroutine,
		// after the response has left.
		select {
		case exit <- struct{}{}:
		default:
		}
	})

	s.Handle("GET", "/stop", func(c *server.Ctx) {
		c.Close()
		c.Text("stopping\n")
		// After the response has left, like /exit.
		time.AfterFunc(200*time.Millisecond, func() {
			log.Print("SIGSTOP to myself on request")
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		})
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case s := <-sig:
			if s == syscall.SIGTERM {
				log.Print("SIGTERM: draining")
			} else {
				log.Printf("%v: draining", s)
			}
			cancel()
		case <-exit:
			time.Sleep(200 * time.Millisecond)
			log.Printf("exiting with status %d on request", ExitStatus)
			os.Exit(ExitStatus)
		}
	}()
	if err := s.ListenAndServe(ctx); err != nil {
		log.Fatal(err)
	}
	log.Print("exit 0")
}
