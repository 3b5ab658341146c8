package ethnl

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKernel sends the requests to this machine's kernel, in a network
// namespace of the test's own: RINGS_GET and RINGS_SET for lo, which has
// no ring parameters (EOPNOTSUPP), and RINGS_GET for a device that does
// not exist (ENODEV). Either answer means the kernel's strict policy took
// the message apart and found the device by the header's name: a
// malformed header or a nest without NLA_F_NESTED is EINVAL.
func TestKernel(t *testing.T) {
	done := make(chan struct{})
	var dialErr, loGet, loSet, noDev error
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the namespace dies with the thread
		if dialErr = unix.Unshare(unix.CLONE_NEWNET); dialErr != nil {
			return
		}
		c, err := Dial()
		if err != nil {
			dialErr = err
			return
		}
		defer c.Close()
		_, loGet = c.Rings("lo")
		loSet = c.SetTxPushBufLen("lo", 224)
		_, noDev = c.Rings("hotpath-none0")
	}()
	<-done
	if errors.Is(dialErr, unix.EPERM) || errors.Is(dialErr, ErrNoFamily) {
		t.Skipf("%v", dialErr)
	}
	if dialErr != nil {
		t.Fatal(dialErr)
	}
	if !errors.Is(loGet, unix.EOPNOTSUPP) || !errors.Is(loSet, unix.EOPNOTSUPP) {
		t.Errorf("lo: get %v, set %v; want EOPNOTSUPP", loGet, loSet)
	}
	if !errors.Is(noDev, unix.ENODEV) {
		t.Errorf("no such device: %v, want ENODEV", noDev)
	}
}
