// Command delaybackend is the backend of the bench's "api-defer" row: GET
// /{id} answers {"backend":"id"} after -delay (a slow service the example
// API's /v1/proxy/{id} calls off its worker). A request whose client
// leaves first ends then.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18503", "listen address")
	delay := flag.Duration("delay", 50*time.Millisecond, "time before each answer")
	flag.Parse()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(*delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"backend":%q}`, strings.TrimPrefix(r.URL.Path, "/"))
	})
	log.Fatal((&http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}
