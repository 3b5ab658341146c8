// Command fixedload sends a fixed number of keep-alive requests over a
// fixed number of connections, pipelined to a given depth, and reads every
// response. The benchmark runs a server under `strace -c -f` while this
// runs, so syscalls per request are counted over an exact request count.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	path := flag.String("path", "/json", "request path")
	conns := flag.Int("c", 64, "connections")
	perConn := flag.Int("n", 1000, "requests per connection")
	depth := flag.Int("depth", 1, "pipeline depth")
	bodyFile := flag.String("body", "", "POST this file's content as application/json (default: GET)")
	flag.Parse()

	req := []byte("GET " + *path + " HTTP/1.1\r\nHost: " + *addr + "\r\n\r\n")
	if *bodyFile != "" {
		body, err := os.ReadFile(*bodyFile)
		if err != nil {
			log.Fatal(err)
		}
		req = []byte("POST " + *path + " HTTP/1.1\r\nHost: " + *addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
	}
	batch := bytes.Repeat(req, *depth)
	var wg sync.WaitGroup
	errs := make(chan error, *conns)
	start := time.Now()
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- run(*addr, batch, *depth, *perConn)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			log.Fatal(err)
		}
	}
	total := *conns * (*perConn / *depth) * *depth
	fmt.Fprintf(os.Stdout, "requests=%d seconds=%.3f\n", total, time.Since(start).Seconds())
}

func run(addr string, batch []byte, depth, n int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	for i := 0; i+depth <= n; i += depth {
		if _, err := c.Write(batch); err != nil {
			return err
		}
		for range depth {
			if err := readResponse(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// readResponse reads one response with a Content-Length body.
func readResponse(r *bufio.Reader) error {
	length := -1
	status := ""
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if status == "" {
			status = string(line)
			if !bytes.HasPrefix(line, []byte("HTTP/1.1 200")) {
				return fmt.Errorf("status %q", line)
			}
			continue
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if length < 0 {
		return fmt.Errorf("response without Content-Length")
	}
	_, err := io.CopyN(io.Discard, r, int64(length))
	return err
}
