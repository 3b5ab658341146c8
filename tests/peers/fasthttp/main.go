// Command fasthttp serves the TechEmpower /json and /plaintext endpoints
// with fasthttp, the way its TechEmpower entry does: a fresh struct per
// request through encoding/json, Server and Date headers from fasthttp.
package main

import (
	"encoding/json"
	"flag"
	"log"

	"github.com/valyala/fasthttp"
)

type message struct {
	Message string `json:"message"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	flag.Parse()
	h := func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/json":
			ctx.SetContentType("application/json")
			b, err := json.Marshal(message{Message: "Hello, World!"})
			if err != nil {
				ctx.Error(err.Error(), 500)
				return
			}
			ctx.SetBody(b)
		case "/plaintext":
			ctx.SetContentType("text/plain")
			ctx.SetBodyString("Hello, World!")
		default:
			ctx.Error("not found", fasthttp.StatusNotFound)
		}
	}
	s := &fasthttp.Server{Handler: h, Name: "fasthttp"}
	log.Printf("fasthttp: ready on %s", *addr)
	if err := s.ListenAndServe(*addr); err != nil {
		log.Fatal(err)
	}
}
