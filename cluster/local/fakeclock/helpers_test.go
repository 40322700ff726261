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

// kit prepares one shim for all tests: compiling it per test would be most
// of the package's run time.
func kit(t *testing.T) *Kit {
	t.Helper()
	sharedKitOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
	cmd     *exec.Cmd
	pid     int
	started time.Time // just before exec, an upper bound on libfaketime's start
	offset  string    // offset file
	logPath string
	client  *redis.Client
	exited  chan struct{}
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
	n.client = redis.NewClient(&redis.Options{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Protocol: 2, DisableIdentity: true,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1,
	})
	t.Cleanup(n.stop(t))

	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := n.client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("redis-server exited before answering: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer PING within 10s: %w", err)
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
			case <-time.After(5 * time.Second):
				t.Errorf("redis-server %d ignored SIGTERM for 5s; killing it", n.pid)
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

// serverTime is redis's TIME minus the real time, read in the middle of the
// round trip.
func (n *node) clockError(t *testing.T) time.Duration {
	t.Helper()
	before := time.Now()
	ts, err := n.client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	mid := before.Add(time.Since(before) / 2)
	return ts.Sub(mid)
}
