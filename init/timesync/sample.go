package timesync

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/beevik/ntp"
)

// sample is one NTP answer that passed every check: the only kind the
// syncer corrects the clock from. parseSample is its one constructor.
type sample struct {
	offset   time.Duration // of the local clock: positive when it is behind
	rtt      time.Duration
	distance time.Duration // root distance: the error bound of offset
	stratum  int
}

// MaxDistance is the largest root distance (half the round trip plus the
// server's own root delay and dispersion: how wrong the offset may be)
// an answer may have: RFC 5905's MAXDIST, 1.5 s as in ntpd. The NTP
// library only refuses beyond MAXDISP (16 s).
const MaxDistance = 1500 * time.Millisecond

// KissError is a kiss-o'-death answer (stratum 0): the server tells the
// client to stop (DENY, RSTR) or to slow down (RATE), or something else
// it need not act on.
type KissError struct {
	Server string
	Code   string // the reference id: four printable ASCII bytes, else 0x and 8 hex digits
}

func (e *KissError) Error() string {
	what := "not usable"
	switch e.Code {
	case "DENY", "RSTR":
		what = "access denied: no more queries to this server"
	case "RATE":
		what = "asked to slow down: backing off"
	}
	return fmt.Sprintf("ntp %s: kiss-o'-death %s: %s", e.Server, strconv.Quote(e.Code), what)
}

// Stop reports whether the server asked never to be queried again.
func (e *KissError) Stop() bool { return e.Code == "DENY" || e.Code == "RSTR" }

// parseSample checks an answer the NTP library already matched to our
// query (server mode, origin timestamp equal to our transmit timestamp,
// non-zero transmit time, receive not after transmit) and accepts it only
// when it is also usable: not a kiss-o'-death, a stratum of 1 to 15, a
// leap indicator other than 3 (unsynchronised), a fresh reference time,
// and a root distance within maxDistance.
func parseSample(server string, r *ntp.Response, maxDistance time.Duration) (sample, error) {
	if r.Stratum == 0 {
		code := r.KissCode // "" unless printable ASCII
		if code == "" {
			code = fmt.Sprintf("0x%08x", r.ReferenceID)
		}
		return sample{}, &KissError{Server: server, Code: code}
	}
	if err := r.Validate(); err != nil {
		return sample{}, fmt.Errorf("ntp %s: answer not usable: %w (stratum %d, leap %d)", server, err, r.Stratum, r.Leap)
	}
	if r.RootDistance > maxDistance {
		return sample{}, fmt.Errorf("ntp %s: answer not usable: root distance %v beyond %v", server, r.RootDistance, maxDistance)
	}
	return sample{offset: r.ClockOffset, rtt: r.RTT, distance: r.RootDistance, stratum: int(r.Stratum)}, nil
}

// StepRefusedError is a step the syncer would not make: beyond MaxStep
// after the first sync, or not confirmed by the samples that followed.
type StepRefusedError struct {
	Server string
	Offset time.Duration
	Why    string
}

func (e *StepRefusedError) Error() string {
	return fmt.Sprintf("ntp %s: step of %v refused: %s", e.Server, e.Offset, e.Why)
}

// ErrRateLimited is returned, without a query, while the syncer backs
// off after a RATE kiss-o'-death.
var ErrRateLimited = errors.New("backing off after a RATE kiss-o'-death")
