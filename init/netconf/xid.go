package netconf

import (
	"context"
	"sync"

	"github.com/hotpath-dev/hotpath/init/crng"
	uiorand "github.com/u-root/uio/rand"
)

// nonblockingXID makes the DHCP client's transaction ids come from a
// source that never waits for the CRNG. insomniacslk/dhcp's dhcpv4.New
// draws every message's transaction id from uio/rand.Reader, which polls
// getrandom(GRND_NONBLOCK) until the CRNG is ready (up to two minutes),
// before any modifier such as WithTransactionID runs: on a CPU without
// RDRAND that failed every attempt of a 5 s timeout. A transaction id only
// matches replies to requests; it needs no cryptographic strength.
//
// uio/rand.Reader is that library's only hook, a package variable, so it
// is replaced once; nothing else in the init reads it.
var nonblockingXID = sync.OnceFunc(func() {
	uiorand.Reader = nonblockingReader{}
})

type nonblockingReader struct{}

func (nonblockingReader) Read(b []byte) (int, error) { return crng.NonblockingRead(b) }

func (nonblockingReader) ReadContext(_ context.Context, b []byte) (int, error) {
	return crng.NonblockingRead(b)
}
