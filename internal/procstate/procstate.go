// Package procstate tells whether a process still runs, for the code that
// cleans up after a killed harness: the harness (is a run's owner alive?)
// and the local backend (are a killed run's servers gone?).
package procstate

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Alive reports whether a process with this PID exists (one of another
// user's, which may not be signalled, too).
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// Running reports whether pid is a process that has not exited: alive, and
// not a zombie (an exited process whose parent has not reaped it yet; the
// orphans of a killed harness wait for init to reap them, which can take
// seconds). A zombie's PID cannot be reused until it is reaped, so files
// named for it are its own.
func Running(pid int) bool {
	if !Alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the
	// state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// WaitGone polls until none of pids runs, or d passes.
func WaitGone(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for Running(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}
