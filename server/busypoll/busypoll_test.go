package busypoll

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epollParams needs the host's kernel to have EPIOCSPARAMS (6.9+); older
// hosts check the fallback only.
func newEpoll(t *testing.T) int {
	t.Helper()
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestLayout(t *testing.T) {
	// struct epoll_params is 8 bytes; the request numbers encode its size
	// (_IOW(0x8A, 0x01, 8)), so a change of layout would not reach the
	// kernel's field it names.
	if s := unsafe.Sizeof(Params{}); s != 8 {
		t.Fatalf("sizeof(Params) = %d, want 8", s)
	}
	if unix.EPIOCSPARAMS != 0x40088a01 || unix.EPIOCGPARAMS != 0x80088a02 {
		t.Fatalf("request numbers %#x %#x", unix.EPIOCSPARAMS, unix.EPIOCGPARAMS)
	}
}

func TestSetEpoll(t *testing.T) {
	fd := newEpoll(t)
	if _, err := GetEpoll(fd); errors.Is(err, ErrUnsupported) {
		t.Skipf("host kernel has no EPIOCGPARAMS (Linux < 6.9): %v", err)
	}
	for _, p := range []Params{
		{Usecs: 50, Budget: 16, Prefer: 1},
		{Usecs: 0, Budget: 0, Prefer: 0},
		{Usecs: 200, Budget: 64, Prefer: 1},
	} {
		got, err := SetEpoll(fd, p)
		if err != nil {
			t.Fatalf("SetEpoll(%v): %v", p, err)
		}
		if got != p {
			t.Errorf("SetEpoll(%v): kernel took %v", p, got)
		}
	}
}

func TestSetEpollRefused(t *testing.T) {
	fd := newEpoll(t)
	for _, p := range []Params{{Prefer: 2}, {Usecs: 1 << 31}} {
		if _, err := SetEpoll(fd, p); err == nil {
			t.Errorf("SetEpoll(%v) accepted", p)
		}
	}
	// A non-zero pad is the kernel's own refusal (Check cannot see it
	// through the exported fields): the raw call, to show the kernel does.
	if _, err := GetEpoll(fd); errors.Is(err, ErrUnsupported) {
		t.Skip("host kernel has no EPIOCSPARAMS")
	}
	p := Params{Usecs: 1, pad: 1}
	if err := ioctl(fd, unix.EPIOCSPARAMS, &p); !errors.Is(err, unix.EINVAL) {
		t.Errorf("pad 1: %v, want EINVAL", err)
	}
}

// A file without the ioctl answers ENOTTY, as a 6.1 epoll instance does
// (its file_operations have no unlocked_ioctl): that is ErrUnsupported,
// the fallback the server takes.
func TestUnsupported(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	_, err = SetEpoll(int(r.Fd()), Params{Usecs: 50})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("pipe: %v, want ErrUnsupported", err)
	}
}

func TestSetSocket(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := SetSocket(fd, true, 32); err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL); err != nil || v != 1 {
		t.Errorf("SO_PREFER_BUSY_POLL = %d, %v", v, err)
	}
	// SO_BUSY_POLL_BUDGET has no getsockopt (net/core/sock.c); the set
	// above is all the kernel lets us check. Turning prefer off again:
	if err := SetSocket(fd, false, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PREFER_BUSY_POLL); err != nil || v != 0 {
		t.Errorf("SO_PREFER_BUSY_POLL = %d, %v after turning it off", v, err)
	}
}
