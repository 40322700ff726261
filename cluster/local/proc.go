package local

import (
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// launchHook, when set (by tests), is called each time the backend has
// created a process, with the process's node directory and PID: a fixed
// point in a start-up at which a test can act (cancel it, say).
var launchHook atomic.Pointer[func(dir string, pid int)]

func afterLaunch(dir string, pid int) {
	if f := launchHook.Load(); f != nil {
		(*f)(dir, pid)
	}
}

// proc is a child process the backend owns: a goroutine reaps it and closes
// exited, and it is signalled, stopped and killed only through these
// methods, so that redis-server, redis-sentinel and etcd processes share one
// life cycle.
type proc struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been reaped
}

// PID of the running process, 0 if none.
func (p *proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (p *proc) Running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

func (p *proc) signal(name string, sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil || !p.Running() {
		return fmt.Errorf("node %s is not running", name)
	}
	return cmd.Process.Signal(sig)
}

// killNow sends SIGKILL and waits until the process is reaped.
func (p *proc) killNow() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// kill is Kill for a named process: an error if it is not running.
func (p *proc) kill(name string) error {
	if !p.Running() {
		return fmt.Errorf("node %s is not running", name)
	}
	p.killNow()
	return nil
}

// stop sends SIGTERM (after SIGCONT: a paused process cannot act on it)
// and SIGKILL if the process has not exited within grace. It is a no-op
// for a process that is not running and returns once the process is gone.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		p.killNow()
	}
}
