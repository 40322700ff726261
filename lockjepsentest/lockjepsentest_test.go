package lockjepsentest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/lockjepsentest"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func TestMain(m *testing.M) { harnesstest.Main(m) }

// recorder is a testing.TB that records failures instead of failing: the
// real t serves everything else (Name, Cleanup, Log).
type recorder struct {
	testing.TB
	mu      sync.Mutex
	errors  []string
	fatal   string
	skipped string
}

func (r *recorder) Helper() {}
func (r *recorder) Error(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprint(args...))
}
func (r *recorder) Errorf(format string, args ...any) { r.Error(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.stop(&r.fatal, fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }
func (r *recorder) Skip(args ...any)                  { r.stop(&r.skipped, fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any)  { r.Skip(fmt.Sprintf(format, args...)) }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors) > 0 || r.fatal != ""
}

// stop records msg in what and ends the goroutine, as Fatal and Skip end
// a test.
func (r *recorder) stop(what *string, msg string) {
	r.mu.Lock()
	*what = msg
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls Run with the recorder on its own goroutine, as the testing
// package would, so that Fatal can end it.
func (r *recorder) run(o lockjepsentest.Options) *harness.Outcome {
	var out *harness.Outcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		out = lockjepsentest.Run(r, o)
	}()
	<-done
	return out
}

func namedLock(name string) harness.LockerFactory {
	return func(nodes []locks.Conn, process int) (locks.Locker, error) {
		return locks.NewRedisLock(nodes[0].Client, name, fmt.Sprintf("p%d", process))
	}
}

// The helper fails the test when the lock is broken, and the message tells
// the story: the verdict, the overlap, the release that caused it, where
// the files are.
//
// StopOnFirstViolation with a generous time limit: every client pause
// outlasts the staller's lease, another client takes the expired lock, and
// the staller's plain DEL deletes the key of whoever holds it then (ten
// clients keep the lock held nearly all the time), so a third client
// acquires inside that hold. A pause is armed every 0.4 s on average; the
// run ends at the first violation, within seconds.
func TestRunFailsABrokenLockWithTheStory(t *testing.T) {
	redistest.RequireBinary(t)
	rec := &recorder{TB: t}
	out := rec.run(lockjepsentest.Options{
		Locker:               namedLock(locks.SetnxDel),
		Nemesis:              []string{"client-pause"},
		TimeLimit:            60 * time.Second,
		StopOnFirstViolation: true,
		Store:                t.TempDir(),
	})
	if rec.fatal != "" || rec.skipped != "" {
		t.Fatalf("fatal %q skipped %q", rec.fatal, rec.skipped)
	}
	if out == nil || out.Results.Verdict != "unsafe" {
		t.Fatalf("no violation in the whole 60 s, which the client pauses make certain: the harness is broken; outcome %+v", out)
	}
	if out.Results.StoppedEarly == "" {
		t.Errorf("the run did not stop at its first violation")
	}
	if len(rec.errors) != 1 {
		t.Fatalf("want one failure, got %d: %q", len(rec.errors), rec.errors)
	}
	msg := rec.errors[0]
	for _, want := range []string{
		"verdict is unsafe, expected safe",
		"UNSAFE:", "mutual-exclusion violation", // one: the run stops at it
		"witness 1: process", "while", // the story: who held, who acquired
		"release", // the cause: someone's release in between
		"files: " + out.Dir,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure message lacks %q:\n%s", want, msg)
		}
	}
	t.Logf("the failure message:\n%s", msg)
}

// A correct lock passes; the store, a temporary directory by default, is
// removed when the test passes.
func TestRunPassesACorrectLockAndCleansUp(t *testing.T) {
	redistest.RequireBinary(t)
	var out *harness.Outcome
	t.Run("token", func(t *testing.T) {
		t.Setenv("LOCKJEPSEN_STORE", "")
		out = lockjepsentest.Run(t, lockjepsentest.Options{
			Locker:    namedLock(locks.Token),
			Nemesis:   []string{"client-pause"},
			TimeLimit: 2 * time.Second,
			Recovery:  500 * time.Millisecond,
		})
	})
	if out == nil || out.Results.Verdict != "safe" {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := os.Stat(out.Dir); !os.IsNotExist(err) {
		t.Fatalf("the store of a passing test was kept: %s (%v)", out.Dir, err)
	}
}

// Expect turns the helper around: a test that requires a lock to be
// unsafe, and fails when it is not.
func TestExpectUnsafeOnASafeLockFails(t *testing.T) {
	redistest.RequireBinary(t)
	rec := &recorder{TB: t}
	rec.run(lockjepsentest.Options{
		Locker:    namedLock(locks.Token),
		Expect:    harness.ExpectUnsafe,
		TimeLimit: time.Second,
		Recovery:  100 * time.Millisecond,
		Store:     t.TempDir(),
	})
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "verdict is safe, expected unsafe") {
		t.Fatalf("errors %q fatal %q", rec.errors, rec.fatal)
	}
}

func TestBadOptionsAreFatal(t *testing.T) {
	cases := []struct {
		o    lockjepsentest.Options
		want string
	}{
		{lockjepsentest.Options{}, "Options.Locker (or Options.Client) is required"},
		{lockjepsentest.Options{Locker: namedLock(locks.Token), Scenario: "nope"}, "unknown scenario"},
		{lockjepsentest.Options{Locker: namedLock(locks.Token), Nemesis: []string{"meteor"}}, "--nemesis"},
		{lockjepsentest.Options{Locker: namedLock(locks.Token), LockName: "my lock"}, "must be a plain word"},
		{lockjepsentest.Options{Locker: namedLock(locks.Token), LockName: locks.Token}, "is a built-in lock's"},
	}
	for _, tc := range cases {
		rec := &recorder{TB: t}
		if out := rec.run(tc.o); out != nil || !strings.Contains(rec.fatal, tc.want) {
			t.Errorf("%+v: fatal %q, want %q", tc.o, rec.fatal, tc.want)
		}
	}
}

func TestConfigFromAScenario(t *testing.T) {
	cfg, err := lockjepsentest.Config(lockjepsentest.Options{Locker: namedLock(locks.Token), Scenario: "redlock-restart"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.System != "redlock" || cfg.Targets != "holder" || strings.Join(cfg.Nemesis, ",") != "kill" || cfg.Expect != "safe" || cfg.Locker == nil {
		t.Fatalf("%+v", cfg)
	}
}

// A lock of the user's is named as theirs everywhere, never as the
// built-in lock its configuration happens to name, on any system.
func TestCustomLockIsNamedAsCustom(t *testing.T) {
	redistest.RequireBinary(t)
	for _, c := range []struct{ name, system, wantLabel string }{
		{"", cluster.Single, "custom"},
		{"acme-lock", cluster.Redlock, "acme-lock"},
	} {
		t.Run(c.system, func(t *testing.T) {
			lock := locks.Token
			if c.system == cluster.Redlock {
				lock = locks.RedlockName
			}
			store := t.TempDir()
			out := lockjepsentest.Run(t, lockjepsentest.Options{
				// 250 ms per node, not 50: under two busy loops every
				// node missed 50 ms and no lock was ever granted; this
				// test is about names, not timeouts.
				Locker: func(nodes []locks.Conn, process int) (locks.Locker, error) {
					return locks.New(lock, nodes, locks.Options{TokenPrefix: fmt.Sprintf("p%d", process), NodeTimeout: 250 * time.Millisecond})
				},
				LockName: c.name, LockFences: true, System: c.system,
				TimeLimit: time.Second, Recovery: 100 * time.Millisecond, Store: store,
			})
			if !strings.Contains(out.Dir, c.system+"-"+c.wantLabel+"-") {
				t.Errorf("run directory %s does not carry %q", out.Dir, c.wantLabel)
			}
			var info runfile.RunInfo
			if err := runfile.ReadJSON(filepath.Join(out.Dir, runfile.RunInfoFile), &info); err != nil {
				t.Fatal(err)
			}
			d := info.Described
			if d == nil || !d.CustomLock || !strings.HasPrefix(d.Lock, c.wantLabel+": a lock of your own") || !d.Fences {
				t.Errorf("run.json describes the lock as %+v", d)
			}
			report, err := os.ReadFile(filepath.Join(out.Dir, "report.html"))
			if err != nil {
				t.Fatal(err)
			}
			for _, builtin := range []string{"the correct single-instance lock", "Redlock as Redis documents it"} {
				if strings.Contains(string(report), builtin) {
					t.Errorf("the report describes the custom lock as a built-in one (%q)", builtin)
				}
			}
		})
	}
}

// A failing test with Shrink set says what its run shrank to and how to
// replay it from Go. The plain-DEL lock breaks under a client pause
// (see shrink.TestShrinkDelRelease); the run stops at its first
// violation. The search's budget is short: this test is about the
// failure message (shrink's own tests judge the search), and a search
// out of budget still keeps the smallest run found, once the run as
// recorded has reproduced (three replays of a few seconds each).
func TestShrinkOnFailure(t *testing.T) {
	redistest.RequireBinary(t)
	rec := &recorder{TB: t}
	rec.run(lockjepsentest.Options{Locker: namedLock(locks.SetnxDel), Nemesis: []string{"client-pause"}, Clients: 4,
		TimeLimit: harnesstest.UnsafeTimeLimit, StopOnFirstViolation: true, Store: t.TempDir(), Shrink: true,
		ShrinkBudget: 30 * time.Second})
	if rec.fatal != "" || len(rec.errors) != 1 {
		t.Fatalf("want one failure, got %q (fatal %q)", rec.errors, rec.fatal)
	}
	msg := rec.errors[0]
	for _, want := range []string{"shrunk: minimal reproduction: ", "lockjepsentest.Replay(t, opts, "} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure message lacks %q:\n%s", want, msg)
		}
	}
	t.Log(msg)
}
