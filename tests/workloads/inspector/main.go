// Command inspector is the end-to-end tests' independent witness: shipped
// as the workload of a test image, it serves what it reads of the running
// guest (package tests/inspector: raw /proc and /sys files, the NUMA
// placement among them, rtnetlink, ethtool, its own process and threads)
// so that the test can compare the init's boot report with somebody
// else's reading. It imports nothing from init/.
//
//	GET /inspect  a fresh inspector.Snapshot as JSON
//	GET /conn     this connection as the inspector accepted it
//	              (SO_INCOMING_CPU, the accepting CPU, credentials)
//	GET /json     {"message":"Hello, World!"}, the appliance's answer, so
//	              that one boot shows both traffic and the inspector's view
//
// It follows the workload contract: it listens on HOTPATH_PORT (default
// 8080), and on SIGTERM prints "inspector: SIGTERM", drains and exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hotpath-dev/hotpath/tests/inspector"
)

type connKey struct{}

func main() {
	log.SetFlags(0)
	log.SetPrefix("inspector: ")
	port := os.Getenv("HOTPATH_PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /inspect", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, inspector.Collect())
	})
	mux.HandleFunc("GET /json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"message": "Hello, World!"})
	})
	mux.HandleFunc("GET /conn", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, r.Context().Value(connKey{}))
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		// Read when the connection is accepted, on the serving goroutine.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			info := inspector.Conn{Remote: c.RemoteAddr().String(), IncomingCPU: -1, CPU: -1}
			if sc, ok := c.(syscall.Conn); ok {
				if raw, err := sc.SyscallConn(); err == nil {
					raw.Control(func(fd uintptr) { info = inspector.ConnInfo(int(fd), info.Remote) })
				}
			}
			return context.WithValue(ctx, connKey{}, info)
		},
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", ln.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		log.Printf("%s: draining", map[bool]string{true: "SIGTERM", false: s.String()}[s == syscall.SIGTERM])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	log.Print("exit 0")
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
