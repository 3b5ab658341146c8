package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/hotpath-dev/hotpath/server"
	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// greeting describes its JSON encoding with a jsonenc.Encoder. A value
// receiver lets server.WriteJSON keep each request's fresh value on the
// stack: no allocation.
type greeting struct {
	Name  string
	Count int64
}

func (g greeting) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Key("hello")
	e.String(g.Name)
	e.Key("count")
	e.Int(g.Count)
	e.EndObject()
	return e.Bytes()
}

func Example() {
	cfg := server.DefaultConfig() // or server.ConfigFromEnv(os.Getenv) in a workload
	cfg.Addr, cfg.Port = "127.0.0.1", 0
	cfg.Log = io.Discard

	s := server.New(cfg)
	s.Handle("GET", "/hello", func(c *server.Ctx) {
		n, _ := strconv.ParseInt(string(c.Query()), 10, 64)
		server.WriteJSON(c, greeting{Name: "world", Count: n})
	})
	s.Handle("POST", "/len", func(c *server.Ctx) {
		c.SetResponseBody(strconv.AppendInt(c.ResponseBody(), int64(len(c.Body())), 10))
	})
	if err := s.Start(); err != nil {
		fmt.Println(err)
		return
	}
	// A workload calls s.ListenAndServe(ctx) instead, with ctx from
	// signal.NotifyContext(..., syscall.SIGTERM, os.Interrupt).
	defer s.Shutdown(context.Background())

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(s.Port()) + "/hello?3")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), string(body))
	// Output: 200 application/json {"hello":"world","count":3}
}
