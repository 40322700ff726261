package extclient_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/locks/extclient"
)

func (f *fatals) all() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

// script writes a Python client into a temporary directory and returns
// the options that start it as client p3.
func script(t *testing.T, src string, f *fatals) extclient.Options {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return extclient.Options{Argv: []string{"python3", path}, TTL: 500 * time.Millisecond,
		OpTimeout: 100 * time.Millisecond, Fatal: f.add}
}

// releaser answers init and every acquire at once, and each release as
// argv[1] says: never, late (0.3 s, inside the 1.4 s reply timeout but
// past the operation's 100 ms context), or at once.
const releaser = `import json, sys, time
mode, n = sys.argv[1], 0
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "init":
        out = {"type": "init_ok", "in_reply_to": 0, "protocol": 1}
    elif m["type"] == "acquire":
        n += 1
        out = {"type": "ok", "in_reply_to": m["id"], "token": "p3.%d" % n}
    elif mode == "never":
        sys.stderr.write("ignoring %s %d\n" % (m["type"], m["id"]))
        sys.stderr.flush()
        continue
    else:
        if mode == "late":
            time.sleep(0.3)
        out = {"type": "ok", "in_reply_to": m["id"]}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
`

func startReleaser(t *testing.T, mode string, f *fatals) *extclient.Client {
	t.Helper()
	o := script(t, releaser, f)
	o.Argv = append(o.Argv, mode)
	cl, err := extclient.Start(context.Background(), o, []extclient.Node{{Name: "n1", Addr: "127.0.0.1:1"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// acquireRelease takes the lock and releases it under the 100 ms context
// the workloads give an operation; it returns the release's error.
func acquireRelease(t *testing.T, cl *extclient.Client) error {
	t.Helper()
	l, err := cl.TryAcquire(context.Background(), "lock-0", 500*time.Millisecond)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	return l.Release(ctx)
}

// Issue 34 item 1: a client that answers every acquire but never a
// release was never taken for hung, since the operation's context ended
// before the reply timeout and each acquire's answer reset the count.
// Three releases owed past their reply timeout now fail the run, naming
// them.
func TestClientThatNeverAnswersReleases(t *testing.T) {
	f := &fatals{}
	cl := startReleaser(t, "never", f)
	for i := 0; i < 3; i++ {
		if err := acquireRelease(t, cl); err == nil || locks.Definite(err) {
			t.Fatalf("release %d: %v; an unanswered release must be an unknown outcome", i+1, err)
		}
	}
	ferr := f.wait(t)
	for _, want := range []string{"client p3 (python3 ", "stopped answering",
		"release (request 2), release (request 4), release (request 6)", "ignoring release 6"} {
		if !strings.Contains(ferr.Error(), want) {
			t.Errorf("the failure does not say %q:\n%v", want, ferr)
		}
	}
}

// The same client in a run too short for three releases: the one it owes
// when the run ends fails the run (a 2 s run was called safe).
func TestClientOwesAnAnswerAtTheEnd(t *testing.T) {
	f := &fatals{}
	cl := startReleaser(t, "never", f)
	acquireRelease(t, cl)
	start := time.Now()
	cl.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %s; it should wait at most the 1.4 s reply timeout", d)
	}
	ferr := f.wait(t)
	for _, want := range []string{"client p3 (python3 ", "when the run ended it still owed answers to release (request 2)"} {
		if !strings.Contains(ferr.Error(), want) {
			t.Errorf("the failure does not say %q:\n%v", want, ferr)
		}
	}
}

// A client that answers late, inside the reply timeout, and one the
// harness stopped (a client-pause fault) for longer than the reply
// timeout, owe nothing: neither is taken for hung.
func TestSlowOrPausedClientIsNotHung(t *testing.T) {
	t.Run("late", func(t *testing.T) {
		f := &fatals{}
		cl := startReleaser(t, "late", f)
		for i := 0; i < 4; i++ {
			acquireRelease(t, cl)
		}
		cl.Close()
		if errs := f.all(); len(errs) > 0 {
			t.Fatalf("a client that answers late was failed: %v", errs)
		}
	})
	t.Run("paused", func(t *testing.T) {
		f := &fatals{}
		cl := startReleaser(t, "at-once", f)
		leases := make([]locks.Lease, 3)
		for i := range leases {
			var err error
			if leases[i], err = cl.TryAcquire(context.Background(), "lock-0", time.Second); err != nil {
				t.Fatal(err)
			}
		}
		cl.StopProcess()
		for _, l := range leases {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			l.Release(ctx)
			cancel()
		}
		time.Sleep(2 * time.Second) // past the 1.4 s reply timeout
		cl.ContinueProcess()
		cl.Close()
		if errs := f.all(); len(errs) > 0 {
			t.Fatalf("a client the harness paused was failed: %v", errs)
		}
	})
}

// Issue 34 item 2: one endless line with no newline was left unread once
// the reader's buffer was full, with no error. It is a protocol error
// that quotes the line's start.
func TestClientEndlessLine(t *testing.T) {
	f := &fatals{}
	o := script(t, `import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "init":
        sys.stdout.write(json.dumps({"type": "init_ok", "in_reply_to": 0, "protocol": 1}) + "\n")
        sys.stdout.flush()
        continue
    sys.stdout.write('{"type":"ok","in_reply_to":%d,"token":"' % m["id"])
    while True:
        sys.stdout.write("a" * 65536)
`, f)
	cl, err := extclient.Start(context.Background(), o, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.TryAcquire(context.Background(), "lock-0", time.Second); err == nil || locks.Definite(err) {
		t.Fatalf("acquire: %v; want an unknown outcome", err)
	}
	ferr := f.wait(t)
	for _, want := range []string{"client p3 (python3 ", "a line of more than 1048576 bytes on stdout, with no newline",
		`"{\"type\":\"ok\",\"in_reply_to\":1,\"token\":\"aaaa`} {
		if !strings.Contains(ferr.Error(), want) {
			t.Errorf("the failure does not say %q:\n%.2000s", want, ferr)
		}
	}
}

// Issue 34 item 3: a client that logs in a loop filled 518 MB in a 2 s
// run. Its stderr file keeps the first and the last 2 MiB, with a note of
// what was dropped between them.
func TestClientStderrIsCapped(t *testing.T) {
	f := &fatals{}
	o := script(t, `import json, sys
for i in range(0, 1000000, 1000):
    sys.stderr.write("".join("line %07d\n" % j for j in range(i, i + 1000)))
sys.stderr.write("LAST LINE\n")
sys.stderr.flush()
for line in sys.stdin:
    sys.stdout.write(json.dumps({"type": "init_ok", "in_reply_to": 0, "protocol": 1}) + "\n")
    sys.stdout.flush()
`, f)
	o.StderrDir = t.TempDir()
	cl, err := extclient.Start(context.Background(), o, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b, err := os.ReadFile(filepath.Join(o.StderrDir, "p3.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	const written, kept = 1000000*13 + 10, 4 << 20
	note := fmt.Sprintf("[lockjepsen: %d bytes of this client's stderr dropped here; the file keeps the first 2097152 and the last 2097152]", written-kept)
	s := string(b)
	if len(s) > kept+len(note)+2 {
		t.Errorf("the stderr file has %d bytes; want at most %d and the note", len(s), kept)
	}
	if !strings.HasPrefix(s, "line 0000000\nline 0000001\n") || !strings.HasSuffix(s, "line 0999999\nLAST LINE\n") {
		t.Errorf("the file does not keep both ends: %.40q … %q", s, s[max(0, len(s)-40):])
	}
	if !strings.Contains(s, note) {
		t.Errorf("the file lacks the note %q", note)
	}
}

// Issue 34 item 5: a line that is not JSON before the handshake was
// reported as an exit before init, without the line, while the client
// still ran. It is a protocol error that quotes the line.
func TestClientGarbageBeforeInit(t *testing.T) {
	start := time.Now()
	_, err := extclient.Start(context.Background(), extclient.Options{
		Argv:      []string{"sh", "-c", `echo "Loading config from /etc/lock.conf"; exec sleep 30`},
		OpTimeout: 100 * time.Millisecond}, nil, 3)
	if err == nil {
		t.Fatal("a client that prints a log line on stdout started")
	}
	for _, want := range []string{"client p3 (sh -c ", "did not start", "not a protocol message", `"Loading config from /etc/lock.conf"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "exited before") {
		t.Errorf("the client was running, not exited: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Start took %s: the client should be killed at its first bad line", d)
	}
}

// A client's helpers (a child it starts, one that leaves its session) hold
// its stdout and stderr open: the harness ends the client all the same,
// within its straggler wait rather than the helper's 300 s, and a child in
// the client's process group dies with it. One that left the group with
// setsid is beyond the harness's reach but no longer holds the run.
func TestClientHelpersDoNotHoldTheRun(t *testing.T) {
	for _, mode := range []string{"helper", "double-fork"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f := &fatals{}
			o := options(mode, f)
			o.StderrDir = t.TempDir()
			cl, err := extclient.Start(context.Background(), o, []extclient.Node{{Name: "n1", Addr: "127.0.0.1:1"}}, 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.TryAcquire(context.Background(), "lock-0", 500*time.Millisecond); !locks.Definite(err) {
				t.Fatalf("acquire: %v, want not-acquired", err)
			}
			helper := helperPID(t, filepath.Join(o.StderrDir, "p3.stderr"))
			closed := make(chan struct{})
			go func() {
				cl.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(60 * time.Second): // the helper sleeps 300 s
				t.Fatal("Close still waits after 60 s for the helper's pipes")
			}
			if mode == "helper" {
				deadline := time.Now().Add(30 * time.Second)
				for alive(helper) && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if alive(helper) {
					t.Errorf("the client's helper %d outlived it", helper)
				}
			} else {
				syscall.Kill(helper, syscall.SIGKILL) // ours: the test started it
			}
		})
	}
}

// helperPID reads the helper's pid from the client's stderr file.
func helperPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var b []byte
	for time.Now().Before(deadline) {
		b, _ = os.ReadFile(path)
		var pid int
		if _, err := fmt.Sscanf(string(b), "helper pid %d", &pid); err == nil && pid > 0 {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the client never named its helper: %q", b)
	return 0
}

// A client that never answers its handshake is found once: the second
// probe of the same command line, and the run's launch of it, fail at
// once with the first probe's error rather than waiting out the start
// timeout again (60 s of silence before a run of `--client 'sleep 1000'`
// failed).
func TestSilentClientIsProbedOnce(t *testing.T) {
	argv := []string{"sleep", "1000"}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := extclient.Describe(ctx, argv, time.Second); err == nil {
		t.Fatal("a client that never answers init was described")
	}
	start := time.Now()
	_, err := extclient.Describe(context.Background(), argv, time.Second)
	if err == nil || !strings.Contains(err.Error(), "did not start") {
		t.Fatalf("second probe: %v, want the first probe's error", err)
	}
	_, lerr := extclient.Launch(extclient.Options{Argv: argv, TTL: time.Second, OpTimeout: 100 * time.Millisecond}, extclient.Topology{}, 1)
	if lerr == nil || !strings.Contains(lerr.Error(), "not started again") {
		t.Fatalf("launch: %v, want it refused at once", lerr)
	}
	// Not a timing assertion of the code's speed: without the memory
	// each call waits out the 30 s start timeout.
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the second probe and the launch took %v", took)
	}
}
