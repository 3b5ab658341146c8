// Command fasthttpapi serves the catalogue API of the bench's "api"
// scenario (server/examples/catalog's routes, data and answers, byte for
// byte, from package items) the way fasthttp users write one: routes
// from github.com/fasthttp/router, the parameter from UserValue, bodies
// through encoding/json.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"log"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/hotpath-dev/hotpath/server/examples/catalog/items"
	"github.com/hotpath-dev/hotpath/tests/peers/internal/allocstats"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8083", "listen address")
	n := flag.Int("items", 10000, "catalogue size")
	flag.Parse()
	cat := items.Generate(*n, 1)

	fail := func(ctx *fasthttp.RequestCtx, code int, msg string) {
		b, _ := json.Marshal(map[string]string{"error": msg})
		ctx.SetStatusCode(code)
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
	}
	r := router.New()
	r.GET("/v1/items/{id}", func(ctx *fasthttp.RequestCtx) {
		allocstats.Requests.Add(1)
		id, err := strconv.ParseInt(ctx.UserValue("id").(string), 10, 64)
		if err != nil {
			fail(ctx, 400, "id must be a number")
			return
		}
		it := cat.Get(id)
		if it == nil {
			fail(ctx, 404, "no such item")
			return
		}
		b, err := json.Marshal(it)
		if err != nil {
			fail(ctx, 500, err.Error())
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
	})
	r.POST("/v1/score", func(ctx *fasthttp.RequestCtx) {
		allocstats.Requests.Add(1)
		var req items.ScoreRequest
		dec := json.NewDecoder(bytes.NewReader(ctx.PostBody()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			fail(ctx, 400, err.Error())
			return
		}
		if msg := req.Validate(); msg != "" {
			fail(ctx, 422, msg)
			return
		}
		it := cat.Get(req.ItemID)
		if it == nil {
			fail(ctx, 404, "no such item")
			return
		}
		b, err := json.Marshal(items.Score(&req, it))
		if err != nil {
			fail(ctx, 500, err.Error())
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
	})
	allocstats.Handle("fasthttpapi")
	s := &fasthttp.Server{Handler: r.Handler, Name: "fasthttp"}
	log.Printf("fasthttpapi: ready on %s", *addr)
	if err := s.ListenAndServe(*addr); err != nil {
		log.Fatal(err)
	}
}
