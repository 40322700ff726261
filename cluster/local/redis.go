// Package local runs clusters as redis-server processes on loopback, owned by
// the harness process: every process it starts is stopped by Close, and dies
// with the harness if the harness is killed (Pdeathsig).
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// ErrMissingBinary is returned when redis-server cannot be found.
var ErrMissingBinary = errors.New("redis-server not found")

// ErrMissingSentinel is returned when redis-sentinel cannot be found.
var ErrMissingSentinel = errors.New("redis-sentinel not found")

// ReadyTimeout bounds how long a starting node may take to answer PING
// (and an etcd member to listen, or a restarted one to serve clients). It
// is a failure deadline, not an expectation: redis-server answers within
// milliseconds of its exec on an idle machine, but a cold machine whose
// two cores are busy with compilers and -race tests can stretch that (and
// an etcd member's rejoin) to seconds. A process that dies while starting
// is reported at once, whatever the deadline.
const ReadyTimeout = 60 * time.Second

// Server is one redis-server process.
type Server struct {
	Name    string
	Role    string
	Host    string
	Port    int
	Dir     string // data directory
	LogPath string
	Args    []string // extra configuration, as "--name value" pairs
	// Env is added to the process's environment (the fake clock's).
	Env []string
	// AfterExit runs once each time the process has been reaped, with its
	// PID and when it was launched (to clean up what it leaves, such as
	// libfaketime's shm files).
	AfterExit func(pid int, launched time.Time)
	// ConfigFile, if set, is given to the process before its other
	// options. Sentinel rewrites it (its own state, and a node's replicaof
	// after a failover), so that a restart resumes the role the cluster
	// last gave the process rather than the one it started with.
	ConfigFile string
	// Sentinel runs the process as redis-sentinel (binary must be one).
	Sentinel bool
	// Announce is the address the rest of the cluster uses for this
	// process ("" means Addr).
	Announce string

	binary string

	proc
}

// FindRedisServer locates the redis-server binary: $LOCKJEPSEN_REDIS_SERVER,
// else the PATH.
func FindRedisServer() (string, error) {
	return findBinary("redis-server", "LOCKJEPSEN_REDIS_SERVER", ErrMissingBinary,
		"install it (Debian/Ubuntu: apt-get install redis-server)")
}

// FindRedisSentinel locates the redis-sentinel binary:
// $LOCKJEPSEN_REDIS_SENTINEL, else the PATH.
func FindRedisSentinel() (string, error) {
	return findBinary("redis-sentinel", "LOCKJEPSEN_REDIS_SENTINEL", ErrMissingSentinel,
		"the sentinel system needs it (Debian/Ubuntu: apt-get install redis-sentinel)")
}

// findBinary locates a server binary: the path in $envVar, which must
// exist, else name on the PATH. Both errors wrap missing; the PATH one
// says how to install it (hint) or point envVar at it.
func findBinary(name, envVar string, missing error, hint string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v", missing, envVar, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w on PATH: %s or set %s to its path", missing, hint, envVar)
	}
	return p, nil
}

// freePort asks the kernel for a free port on host. Another process could
// take it before redis binds it; Start retries in that case.
func freePort(host string) (int, error) {
	p := &portPicker{host: host}
	defer p.release()
	return p.pick()
}

// portPicker draws distinct free ports on host: each listener stays open
// until release, so the kernel cannot hand the same port out twice.
type portPicker struct {
	host      string
	listeners []net.Listener
}

func (p *portPicker) pick() (int, error) { return p.pickOn(p.host) }

// pickOn draws a port on another host than the picker's.
func (p *portPicker) pickOn(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	p.listeners = append(p.listeners, l)
	return l.Addr().(*net.TCPAddr).Port, nil
}

// release closes the listeners; it may be called more than once, and on a
// nil picker.
func (p *portPicker) release() {
	if p == nil {
		return
	}
	for _, l := range p.listeners {
		l.Close()
	}
	p.listeners = nil
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// AnnounceAddr is the address the rest of the cluster uses for the process.
func (s *Server) AnnounceAddr() string {
	if s.Announce != "" {
		return s.Announce
	}
	return s.Addr()
}

func (s *Server) args() []string {
	var a []string
	if s.ConfigFile != "" {
		a = append(a, s.ConfigFile)
	}
	if s.Sentinel {
		// A sentinel keeps no data, so the data options below do not
		// apply; "--sentinel" makes the mode explicit even when the binary
		// is not named redis-sentinel (LOCKJEPSEN_REDIS_SENTINEL may
		// point at redis-server).
		a = append(a, "--sentinel",
			"--port", strconv.Itoa(s.Port),
			"--bind", s.Host,
			"--dir", s.Dir,
			"--logfile", s.LogPath,
			"--daemonize", "no",
			"--protected-mode", "no",
		)
		return append(a, s.Args...)
	}
	a = append(a,
		"--port", strconv.Itoa(s.Port),
		"--bind", s.Host,
		"--dir", s.Dir,
		"--logfile", s.LogPath,
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--enable-debug-command", "local",
	)
	return append(a, s.Args...)
}

// Start launches the process (picking a free port if Port is 0) and waits
// until it answers PING.
func (s *Server) Start(ctx context.Context) error {
	// redis-server runs in its data directory and reads paths relative to
	// it, so every path it is given must be absolute.
	var err error
	if s.Dir, err = filepath.Abs(s.Dir); err != nil {
		return fmt.Errorf("start node %s: %w", s.Name, err)
	}
	if s.LogPath, err = filepath.Abs(s.LogPath); err != nil {
		return fmt.Errorf("start node %s: %w", s.Name, err)
	}
	if s.ConfigFile != "" {
		if s.ConfigFile, err = filepath.Abs(s.ConfigFile); err != nil {
			return fmt.Errorf("start node %s: %w", s.Name, err)
		}
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("start node %s: %w", s.Name, err)
	}
	pickPort := s.Port == 0
	for attempt := 0; attempt < 3; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start node %s: %w", s.Name, err)
		}
		if pickPort {
			if s.Port, err = freePort(s.Host); err != nil {
				return fmt.Errorf("start node %s: pick a port: %w", s.Name, err)
			}
		}
		err = s.startOnce(ctx)
		if err == nil || !pickPort || !strings.Contains(err.Error(), "in use") {
			return err
		}
	}
	return err
}

func (s *Server) startOnce(ctx context.Context) error {
	logStart := fileSize(s.LogPath)
	cmd := exec.Command(s.binary, s.args()...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a Ctrl-C in the terminal reaches the harness,
		// which then stops the servers in order, not the servers directly.
		Setpgid: true,
		// Die with the harness even if it is SIGKILLed. Linux sends this
		// when the OS thread that started the child exits; the Go runtime
		// only ends threads whose goroutine locked them, and nothing here
		// does, so in practice it fires when the harness process dies.
		Pdeathsig: syscall.SIGKILL,
	}
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	launched := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %s: %w", s.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		if s.AfterExit != nil {
			s.AfterExit(cmd.Process.Pid, launched)
		}
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	afterLaunch(s.Dir, cmd.Process.Pid)

	if err := s.waitReady(ctx, exited); err != nil {
		s.killNow()
		if cerr := ctx.Err(); errors.Is(cerr, context.Canceled) {
			// Given up, not failed: the log says nothing about it.
			return fmt.Errorf("start node %s: %w", s.Name, cerr)
		}
		tail := strings.TrimSpace(stderr.String() + "\n" + logTail(s.LogPath, logStart, 15))
		return fmt.Errorf("start node %s on %s: %w\n--- output and log of %s:\n%s", s.Name, s.Addr(), err, s.Name, tail)
	}
	return nil
}

// waitReady polls PING until it answers, the process exits or the deadline
// passes (ReadyTimeout, or ctx's if sooner).
func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	// Each attempt is bounded too, so that the loop notices an exit; a
	// refused connection (not listening yet) fails at once, so a longer
	// bound only helps a process that listens but is slow to answer.
	c := redis.NewClient(&redis.Options{
		Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 1,
	})
	defer c.Close()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited during start-up")
		default:
		}
		if lastErr = s.answersAsItself(ctx, c); lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING after %v (the last attempt: %v)", time.Since(start).Round(time.Millisecond), lastErr)
		case <-tick.C:
		}
	}
}

// answersAsItself checks that the process listening on the address is the
// one this Server started: a port picked free can be taken by another
// process before this one binds it, and that process answers PING just as
// well. Until this one exits (reported at once by waitReady, with the
// "address in use" of its log), the stranger's answer counts as no answer.
func (s *Server) answersAsItself(ctx context.Context, c *redis.Client) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	want := s.PID()
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:")
		if !ok {
			continue
		}
		if pid, _ := strconv.Atoi(v); pid != want {
			return fmt.Errorf("%s is answered by another process (PID %s, not %d)", s.Addr(), v, want)
		}
		return nil
	}
	return fmt.Errorf("%s: INFO server has no process_id", s.Addr())
}

// Stop terminates the process: SIGTERM, then SIGKILL if it has not exited
// within a second. It is a no-op for a process that is not running; it
// returns only once the process is gone.
func (s *Server) Stop() { s.stop(time.Second) }

// Kill ends the process with SIGKILL and waits until it is reaped.
func (s *Server) Kill() error { return s.kill(s.Name) }

// Restart starts a stopped or killed server again on the same port and
// data directory.
func (s *Server) Restart(ctx context.Context) error {
	if s.Running() {
		return fmt.Errorf("node %s is still running", s.Name)
	}
	return s.startOnce(ctx)
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logTail returns the last n lines written to path after offset from.
func logTail(path string, from int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < from {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b[from:]), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func nodeDir(spec cluster.Spec, name string) string {
	return filepath.Join(spec.Dir, "nodes", name)
}

// NewServer describes a redis-server process; Start launches it. Port 0
// picks a free port.
func NewServer(binary, name, role, host string, port int, dataDir, logPath string, args []string) *Server {
	return &Server{Name: name, Role: role, Host: host, Port: port, Dir: dataDir, LogPath: logPath, Args: args, binary: binary}
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (s *Server) Pause() error  { return s.signal(s.Name, syscall.SIGSTOP) }
func (s *Server) Resume() error { return s.signal(s.Name, syscall.SIGCONT) }
