// Command nethttp serves the TechEmpower /json and /plaintext endpoints
// with the standard library's net/http.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
)

type message struct {
	Message string `json:"message"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8082", "listen address")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "nethttp")
		w.Header().Set("Content-Type", "application/json")
		b, err := json.Marshal(message{Message: "Hello, World!"})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Write(b)
	})
	mux.HandleFunc("GET /plaintext", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "nethttp")
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("Hello, World!"))
	})
	log.Printf("nethttp: ready on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
