// Package peers holds the servers hotpath is measured against in
// tests/bench: fasthttp, net/http and a minimal epoll responder in Go (the
// C one, cfloor/floor.c, is the floor; run.sh builds it with gcc), plus a
// fixed-count load client for syscall counting. It is its own module so
// that fasthttp stays out of hotpath's go.mod.
package peers
