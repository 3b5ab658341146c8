// Command nnp is TestLockNoNewPrivs's helper, built without cgo like the
// init: it locks no_new_privs, then starts processes from many OS threads
// and prints how many of them had NoNewPrivs set and how many were asked.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"github.com/hotpath-dev/hotpath/init/supervise"
)

func main() {
	// Threads that exist before the flag is set.
	var ready, release sync.WaitGroup
	release.Add(1)
	for range 8 {
		ready.Add(1)
		go func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
		}()
	}
	ready.Wait()
	if err := supervise.LockNoNewPrivs(); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	release.Done()
	const n = 32
	var mu sync.Mutex
	set := 0
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // each start from its own thread
			out, err := exec.Command("/bin/cat", "/proc/self/status").Output()
			if err == nil && strings.Contains(string(out), "NoNewPrivs:\t1") {
				mu.Lock()
				set++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d/%d\n", set, n)
}
