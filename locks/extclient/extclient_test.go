package extclient_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/locks/extclient"
)

// fatals collects what a client reports through Options.Fatal.
type fatals struct {
	mu   sync.Mutex
	errs []error
}

func (f *fatals) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *fatals) wait(t *testing.T) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := len(f.errs)
		f.mu.Unlock()
		if n > 0 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if n > 1 {
				t.Errorf("Fatal was told %d times, want once: %v", n, f.errs)
			}
			return f.errs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("after 30s the client had not been reported failed")
	return nil
}

func options(mode string, f *fatals) extclient.Options {
	return extclient.Options{Argv: []string{"python3", "testdata/badclient.py", mode},
		TTL: 500 * time.Millisecond, OpTimeout: 100 * time.Millisecond, Fatal: f.add}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// Each bad client gets a clear error that names it and ends with its
// stderr; its operations are unknown outcomes (never definite answers the
// client did not give); and no client process is left.
func TestBadClients(t *testing.T) {
	cases := []struct {
		mode     string
		startErr string // the handshake fails with this
		fatal    string // or Fatal is told this during the run
		stderr   string // the tail of stderr the error carries
		acquires int    // acquires to try before the failure shows
	}{
		{mode: "no-start", startErr: "did not start", stderr: "No module named 'frobnicate'"},
		{mode: "bad-version", startErr: "speaks protocol 99; this harness speaks 1"},
		{mode: "garbage", fatal: "not a protocol message", stderr: "request 1: acquire", acquires: 1},
		{mode: "wrong-id", fatal: "an answer to request", stderr: "request 1: acquire", acquires: 1},
		{mode: "negative-validity", fatal: "valid_until_mono_ns must be a positive CLOCK_MONOTONIC time in ns, got -5", stderr: "request 1: acquire", acquires: 1},
		{mode: "no-token", fatal: `an ok to acquire without a token: "{\"type\":\"ok\",\"in_reply_to\":1,\"valid_until_mono_ns\":5`, stderr: "request 1: acquire", acquires: 1},
		{mode: "no-fence", fatal: "an ok to acquire without a fence, from a client that declared the fence capability", stderr: "request 1: acquire", acquires: 1},
		{mode: "string-id", fatal: `field "in_reply_to" must be a number, not a string`, stderr: "request 1: acquire", acquires: 1},
		{mode: "hang", fatal: "stopped answering: it owes answers to acquire (request 1), acquire (request 2), acquire (request 3)", stderr: "request 1: acquire", acquires: 3},
		{mode: "exit", fatal: "exited: exit status 3", stderr: "boom: the client crashed", acquires: 4},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			f := &fatals{}
			cl, err := extclient.Start(context.Background(), options(c.mode, f), []extclient.Node{{Name: "n1", Addr: "127.0.0.1:1"}}, 3)
			if c.startErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.startErr) || !strings.Contains(err.Error(), "client p3 (python3 testdata/badclient.py "+c.mode+")") {
					t.Fatalf("start: %v; want an error naming the client and saying %q", err, c.startErr)
				}
				if c.stderr != "" && !strings.Contains(err.Error(), c.stderr) {
					t.Errorf("the error does not end with the client's stderr %q: %v", c.stderr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			for i := 0; i < c.acquires; i++ {
				_, err := cl.TryAcquire(context.Background(), "lock-0", 500*time.Millisecond)
				if err == nil || (locks.Definite(err) && c.mode != "exit") {
					t.Fatalf("acquire %d: %v; a bad answer must be an unknown outcome", i+1, err)
				}
			}
			ferr := f.wait(t)
			for _, want := range []string{"client p3", c.fatal, c.stderr} {
				if !strings.Contains(ferr.Error(), want) {
					t.Errorf("the failure does not say %q:\n%v", want, ferr)
				}
			}
			cl.Close()
			if pid := cl.PID(); alive(pid) {
				t.Errorf("client process %d still runs after Close", pid)
			}
		})
	}
}

// A program that does not exist is a clear start error.
func TestClientNotFound(t *testing.T) {
	_, err := extclient.Start(context.Background(), extclient.Options{Argv: []string{"/nonexistent/lock-client"}, OpTimeout: time.Second}, nil, 0)
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("got %v", err)
	}
	var pe *extclient.ProtocolError
	if errors.As(err, &pe) {
		t.Errorf("a missing program is not a protocol error: %v", err)
	}
}
