package fakeclock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// unavailable skips a test whose tools are missing, unless the environment
// promises them (CI), where skipping would hide a broken install.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
		t.Fatalf("%s (LOCKJEPSEN_REQUIRE_REDIS is set)", msg)
	}
	t.Skip(msg)
}

var (
	sharedCache   string
	sharedKitOnce sync.Once
	sharedKit     *Kit
	sharedKitErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakeclock-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Deadlines of the tests' waits: failure deadlines sized for a cold
// machine whose two cores are busy (compilers, other -race tests), not
// expectations. Every wait polls and goes on as soon as its condition
// holds; when a deadline passes, the error says what was still missing.
const waitDeadline = time.Minute

// kit prepares one shim for all tests: compiling it per test would be most
// of the package's run time.
func kit(t *testing.T) *Kit {
	t.Helper()
	sharedKitOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		sharedKit, sharedKitErr = Prepare(ctx, sharedCache)
	})
	if errors.Is(sharedKitErr, ErrNoLibfaketime) || errors.Is(sharedKitErr, ErrNoCompiler) {
		unavailable(t, "%v", sharedKitErr)
	}
	if sharedKitErr != nil {
		t.Fatal(sharedKitErr)
	}
	return sharedKit
}

// node is one redis-server under a fake clock.
type node struct {
	cmd *exec.Cmd
	pid int
	// started is just before exec and ready just after the first answer
	// to PING: libfaketime loaded in between.
	started, ready time.Time
	offset         string // offset file
	logPath        string
	client         *redis.Client
	exited         chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts redis-server with the kit's environment at offset +0
// and waits until it answers. It is stopped, and its shared memory checked,
// when the test ends.
func startRedis(t *testing.T) *node {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server not installed (apt-get install redis-server)")
	}
	k := kit(t)
	dir := t.TempDir()
	n := &node{offset: filepath.Join(dir, "clock-offset"), logPath: filepath.Join(dir, "redis.log")}
	if err := Set(n.offset, 0, 1); err != nil {
		t.Fatal(err)
	}
	// A port picked here can be taken before redis binds it; try again.
	for attempt := 0; ; attempt++ {
		err := n.start(t, bin, k, dir, freePort(t))
		if err == nil {
			return n
		}
		if attempt == 2 {
			log, _ := os.ReadFile(n.logPath)
			t.Fatalf("starting redis-server: %v\n%s", err, log)
		}
	}
}

func (n *node) start(t *testing.T, bin string, k *Kit, dir string, port int) error {
	logf, err := os.Create(n.logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", dir, "--logfile", "")
	cmd.Env = append(os.Environ(), k.Env(n.offset)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test binary dies, take redis with it rather than leak it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	n.started = time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd, n.pid, n.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func() { cmd.Wait(); close(n.exited) }()
	// The timeouts bound a command to a node that a loaded machine is
	// slow to schedule; no test uses them to tell a fault.
	n.client = redis.NewClient(&redis.Options{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Protocol: 2, DisableIdentity: true,
		DialTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxRetries: -1,
	})
	t.Cleanup(n.stop(t))

	deadline := time.Now().Add(waitDeadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := n.client.Ping(ctx).Err()
		cancel()
		if err == nil {
			n.ready = time.Now()
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("redis-server exited before answering: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer PING within %v: %w", waitDeadline, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the process by its pid: SIGTERM, then SIGKILL if it lingers,
// then removes whatever shared memory a kill left.
func (n *node) stop(t *testing.T) func() {
	return func() {
		n.client.Close()
		select {
		case <-n.exited:
		default:
			n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.exited:
			case <-time.After(waitDeadline):
				t.Errorf("redis-server %d ignored SIGTERM for %v; killing it", n.pid, waitDeadline)
				n.cmd.Process.Kill()
				<-n.exited
			}
		}
		if err := CleanupShm(n.pid); err != nil {
			t.Error(err)
		}
		for _, p := range ShmFiles(n.pid) {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s left behind", p)
			}
		}
	}
}

func (n *node) setClock(t *testing.T, offset time.Duration, rate float64) {
	t.Helper()
	if err := Set(n.offset, offset, rate); err != nil {
		t.Fatal(err)
	}
}

// A reading of the node's clock: TIME, and the real time just before the
// request and just after the reply. The node read its clock somewhere in
// between, so its offset from real time lies in [server-after,
// server-before]; how wide that is depends on the round trip, which a
// loaded machine can stretch at will.
type reading struct {
	before, server, after time.Time
}

func (n *node) readClock(t *testing.T) reading {
	t.Helper()
	var r reading
	r.before = time.Now()
	ts, err := n.client.Time(bg).Result()
	r.after = time.Now()
	if err != nil {
		t.Fatal(err)
	}
	r.server = ts
	return r
}

// offsets are the bounds a reading puts on the node's offset from real
// time (TIME has microseconds; a millisecond covers the rounding).
func (r reading) offsets() (lo, hi time.Duration) {
	return r.server.Sub(r.after) - time.Millisecond, r.server.Sub(r.before) + time.Millisecond
}

func (r reading) String() string {
	lo, hi := r.offsets()
	return fmt.Sprintf("offset in [%v, %v] (round trip %v)", lo, hi, r.after.Sub(r.before))
}

// checkOffset reads the node's clock until a reading decides whether the
// offset lies within tol of what want says it should be for a reading
// taken between before and after: inside (passes) or outside (fails the
// test). A reading whose round trip is too long to tell is taken again.
func (n *node) checkOffset(t *testing.T, what string, tol time.Duration, want func(before, after time.Time) (lo, hi time.Duration)) reading {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for {
		r := n.readClock(t)
		lo, hi := r.offsets()
		wlo, whi := want(r.before, r.after)
		wlo, whi = wlo-tol, whi+tol
		switch {
		case lo >= wlo && hi <= whi:
			return r
		case hi < wlo || lo > whi:
			t.Fatalf("%s: %v, want [%v, %v]", what, r, wlo, whi)
		case time.Now().After(deadline):
			t.Fatalf("%s: no reading within %v with a round trip short enough to tell [%v, %v] (the last: %v)", what, waitDeadline, wlo, whi, r)
		}
	}
}

// offsetIs wants a fixed offset.
func offsetIs(d time.Duration) func(time.Time, time.Time) (time.Duration, time.Duration) {
	return func(time.Time, time.Time) (time.Duration, time.Duration) { return d, d }
}
