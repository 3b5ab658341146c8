// Command probe is the init tests' workload: it serves like any workload
// on the server library and lets a test reach the init from inside the
// guest, where the test cannot go:
//
//	GET /cpu     "worker=W running=R incoming=I allowed=A": the worker's
//	             pinned CPU, the CPU the handler runs on (getcpu(2)), the
//	             socket's SO_INCOMING_CPU, so a test counts accepts per
//	             worker, and the CPUs the thread may run on
//	             (sched_getaffinity, "0-3" form): W alone when pinned
//	GET /accepts "cpu=C accepted=A foreign=F" per worker (Server.Accepts):
//	             the connections each worker accepted, and how many of them
//	             the kernel received on another CPU (SO_INCOMING_CPU)
//	GET /irq?queue=Q&cpu=C
//	             binds RX queue Q's interrupt (the /proc/interrupts line
//	             ending "-input.Q", virtio-net's) to CPU C, as the init's
//	             nic-irq-affinity would, and answers "irq=N affinity=L":
//	             lets a test steer a flow to another CPU from outside
//	GET /signal  sends PID 1 every signal but SIGKILL, SIGSTOP and the
//	             three shutdown requests (SIGTERM, SIGUSR2, SIGINT), and
//	             says how many it sent
//	GET /panic   writes "c" to /proc/sysrq-trigger after answering: a
//	             kernel panic, to see the machine reboot
//
// With -exit-now it exits with status 1 at once, before listening: a
// workload that never becomes ready.
//
// It is written from outside the init (no import of init/), the way a
// user's workload is.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/hotpath-dev/hotpath/server"
	"golang.org/x/sys/unix"
)

// notSent are the signals /signal leaves out: uncatchable, or a shutdown
// request the init would act on.
var notSent = map[syscall.Signal]bool{
	unix.SIGKILL: true, unix.SIGSTOP: true,
	unix.SIGTERM: true, unix.SIGUSR2: true, unix.SIGINT: true,
}

// signalInit sends PID 1 every other signal from 1 to SIGRTMAX (64).
func signalInit() (int, error) {
	n := 0
	for s := syscall.Signal(1); s <= 64; s++ {
		if notSent[s] {
			continue
		}
		if err := unix.Kill(1, s); err != nil {
			return n, fmt.Errorf("kill(1, %d): %w", s, err)
		}
		n++
		// Let the init take each one; standard signals do not queue.
		time.Sleep(5 * time.Millisecond)
	}
	return n, nil
}

func getcpu() int {
	var cpu uint32
	if _, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); errno != 0 {
		return -1
	}
	return int(cpu)
}

// allowedCPUs is the calling thread's affinity as a CPU list ("0,2"), or
// "?" when the kernel does not say.
func allowedCPUs() string {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "?"
	}
	var b []byte
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			if len(b) > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
	}
	return string(b)
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("probe: ")
	cfg, err := server.ConfigFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	cfg.RegisterFlags(flag.CommandLine)
	exitNow := flag.Bool("exit-now", false, "exit with status 1 at once")
	flag.Parse()
	if *exitNow {
		log.Print("exiting at once (-exit-now)")
		os.Exit(1)
	}

	panicNow := make(chan struct{}, 1)
	s := server.New(cfg)
	s.Handle("GET", "/cpu", func(c *server.Ctx) {
		in, err := c.IncomingCPU()
		if err != nil {
			in = -1
		}
		c.Text("worker=" + strconv.Itoa(c.WorkerCPU()) + " running=" + strconv.Itoa(getcpu()) + " incoming=" + strconv.Itoa(in) +
			" allowed=" + allowedCPUs() + "\n")
	})
	s.Handle("GET", "/accepts", func(c *server.Ctx) {
		for _, a := range s.Accepts() {
			c.SetResponseBody(fmt.Appendf(c.ResponseBody(), "cpu=%d accepted=%d foreign=%d\n", a.CPU, a.Accepted, a.Foreign))
		}
	})
	s.Handle("GET", "/irq", func(c *server.Ctx) {
		q, _ := c.QueryValue("queue")
		cpu, _ := c.QueryValue("cpu")
		irq, aff, err := bindQueueIRQ("/proc", string(q), string(cpu))
		if err != nil {
			c.Error(500, err.Error())
			return
		}
		c.Text("irq=" + irq + " affinity=" + aff + "\n")
	})
	s.Handle("GET", "/signal", func(c *server.Ctx) {
		n, err := signalInit()
		if err != nil {
			c.Error(500, err.Error())
			return
		}
		c.Text("sent " + strconv.Itoa(n) + " signals to pid 1\n")
	})
	s.Handle("GET", "/panic", func(c *server.Ctx) {
		c.Close()
		c.Text("panicking\n")
		select {
		case panicNow <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			log.Print("SIGTERM: draining")
			cancel()
		case <-panicNow:
			time.Sleep(300 * time.Millisecond) // the answer leaves first
			log.Print("writing c to /proc/sysrq-trigger")
			if err := os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0); err != nil {
				log.Printf("sysrq: %v", err)
			}
		}
	}()
	if err := s.ListenAndServe(ctx); err != nil {
		log.Fatal(err)
	}
	log.Print("exit 0")
}
