// Command nethttpapi serves the catalogue API of the bench's "api"
// scenario (server/examples/catalog's routes, data and answers, byte for
// byte, from package items) the way the standard library is used for
// one: Go 1.22 ServeMux patterns, r.PathValue, encoding/json.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"strconv"

	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
	"github.com/hotpath-dev/hotpath/tests/peers/internal/allocstats"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8084", "listen address")
	n := flag.Int("items", 10000, "catalogue size")
	flag.Parse()
	cat := items.Generate(*n, 1)

	fail := func(w http.ResponseWriter, code int, msg string) {
		b, _ := json.Marshal(map[string]string{"error": msg})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(b)
	}
	reply := func(w http.ResponseWriter, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			fail(w, 500, err.Error())
			return
		}
		w.Header().Set("Server", "nethttp")
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		allocstats.Requests.Add(1)
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			fail(w, 400, "id must be a number")
			return
		}
		it := cat.Get(id)
		if it == nil {
			fail(w, 404, "no such item")
			return
		}
		reply(w, it)
	})
	mux.HandleFunc("POST /v1/score", func(w http.ResponseWriter, r *http.Request) {
		allocstats.Requests.Add(1)
		var req items.ScoreRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			fail(w, 400, err.Error())
			return
		}
		if msg := req.Validate(); msg != "" {
			fail(w, 422, msg)
			return
		}
		it := cat.Get(req.ItemID)
		if it == nil {
			fail(w, 404, "no such item")
			return
		}
		reply(w, items.Score(&req, it))
	})
	allocstats.Handle("nethttpapi")
	log.Printf("nethttpapi: ready on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
