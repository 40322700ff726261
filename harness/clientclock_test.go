package harness_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// requireDebianPython skips (or, in CI, fails) where /usr/bin/python3
// lacks Debian's python3-redis.
func requireDebianPython(t *testing.T) {
	t.Helper()
	redistest.RequireBinary(t)
	if out, err := exec.Command("/usr/bin/python3", "-c", "import redis").CombinedOutput(); err != nil {
		msg := "Debian's python3-redis is missing: " + strings.TrimSpace(string(out))
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// TestClientClockFaults moves one protocol client's wall clock 1.5 TTL
// ahead of the others' (its monotonic clock stays real). The lock that
// keeps its expiry in the value from the client's wall clock
// (testdata/clock_in_value.py) is broken by it: the moved client finds
// every other client's expiry passed and takes the key with GETSET while
// its holder's lease is live, at its first try under the fault; the run
// goes its 6 s, so that the moved client's acts are counted even when
// the lock's own release race breaks it first. A strobe and a drift (x3) get there too, within a second. The correct token lock (SET NX PX, beliefs on CLOCK_MONOTONIC)
// stays safe under the same faults.
func TestClientClockFaults(t *testing.T) {
	requireDebianPython(t)
	broken, err := filepath.Abs("testdata/clock_in_value.py")
	if err != nil {
		t.Fatal(err)
	}
	token, err := filepath.Abs("../examples/review/token_lock.py")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, client, fault string
		unsafe              bool
	}{
		{"clock-in-value/offset", broken, nemesis.ClientClockOffset, true},
		{"clock-in-value/jump", broken, nemesis.ClientClockJump, true},
		// Half of every 100 ms the clock is 1.5 TTL ahead.
		{"clock-in-value/strobe", broken, nemesis.ClientClockStrobe, true},
		// At --clock-rate 3 the clock is 1.5 TTL ahead after 375 ms.
		{"clock-in-value/drift", broken, nemesis.ClientClockDrift, true},
		{"token/offset", token, nemesis.ClientClockOffset, false},
		{"token/jump", token, nemesis.ClientClockJump, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			started := time.Now()
			cfg := harnesstest.ShortConfig(t)
			cfg.Client = []string{"/usr/bin/python3", c.client}
			cfg.Clients = 4
			cfg.Nemesis = []string{c.fault}
			cfg.NemesisInterval, cfg.FaultDuration = 100*time.Millisecond, time.Minute
			cfg.ClockRate = 3
			if c.unsafe {
				// The whole time, not to the first overlap: this lock can
				// also break by its release's own race (GET, then DEL),
				// and a run that stopped there (a CI run, at 1.2 s) had
				// not yet seen the moved client take a live key.
				cfg.Expect = harness.ExpectUnsafe
				cfg.TimeLimit = 6 * time.Second
			}
			out := harnesstest.Run(t, cfg)
			r := out.Results
			if !c.unsafe && r.Verdict != checker.VerdictSafe {
				t.Fatalf("verdict %s, want safe: a client's wall clock does not reach a lock that counts on TTLs and CLOCK_MONOTONIC\n%s", r.Verdict, strings.Join(r.Summary(), "\n"))
			}
			if n := r.Exercised.Count(checker.MomentMovedClientAcquires); n == 0 {
				t.Errorf("no %s moment: the moved client never asked for a held key\n%s", checker.MomentMovedClientAcquires, strings.Join(r.Summary(), "\n"))
			}
			requireNoClientShm(t, started)
		})
	}
}

// requireNoClientShm fails if a process that has exited left
// libfaketime's files in /dev/shm since started: the clients' are
// removed once each is reaped.
func requireNoClientShm(t *testing.T, started time.Time) {
	t.Helper()
	files, _ := filepath.Glob("/dev/shm/faketime_shm_*")
	for _, f := range files {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(f), "faketime_shm_"))
		fi, serr := os.Stat(f)
		if err != nil || serr != nil || fi.ModTime().Before(started) || harnesstest.ProcessAlive(pid) {
			continue
		}
		t.Errorf("libfaketime's %s left by exited process %d", f, pid)
	}
}

// TestClientClockFaultsRefusedForGoLocks: a Go lock runs in the
// harness's own process, whose clock no fault can move; the client clock
// faults are refused before anything starts (a usage error, exit 2),
// pointing at clock-offset.
func TestClientClockFaultsRefusedForGoLocks(t *testing.T) {
	for _, fault := range nemesis.ClientClockFaults() {
		t.Run(fault, func(t *testing.T) {
			cfg := harnesstest.ShortConfig(t)
			cfg.Nemesis = []string{fault}
			_, err := harness.Run(context.Background(), cfg)
			if !harness.IsUsage(err) || !strings.Contains(err.Error(), nemesis.ClockOffset) || !strings.Contains(err.Error(), "Go lock") {
				t.Fatalf("harness.Run(token lock, %s) = %v, want a usage error naming %s", fault, err, nemesis.ClockOffset)
			}
		})
	}
}

// TestClockOffsetBreaksAbsoluteExpiries: a server clock kept
// --clock-jump (1.5 TTL) ahead of the clients' from before the first
// grant ends every key set with SET NX PXAT from the client's clock at
// once (testdata/pxat_lock.py): the next client is granted it while the
// holder believes, at the first contended acquire. The overlap is the
// lock's: clock-offset takes no key by itself (not LosesKeys).
func TestClockOffsetBreaksAbsoluteExpiries(t *testing.T) {
	requireDebianPython(t)
	script, err := filepath.Abs("testdata/pxat_lock.py")
	if err != nil {
		t.Fatal(err)
	}
	cfg := harnesstest.ShortConfig(t)
	cfg.Client = []string{"/usr/bin/python3", script}
	cfg.Clients = 4
	cfg.Nemesis = []string{nemesis.ClockOffset}
	cfg.Expect = harness.ExpectUnsafe
	harnesstest.UntilViolation(&cfg)
	out := harnesstest.Run(t, cfg)
	if a := out.Results.Answers; a == nil || a.Lock != checker.AnswerUnsafe {
		t.Fatalf("answers %+v, want the lock's overlap\n%s", a, strings.Join(out.Results.Summary(), "\n"))
	}
	harnesstest.RequireNoShm(t, out.Dir)
}

// TestClockOffsetTakesNoKeyFromRelativeTTLs: the same offset moves no
// relative TTL (SET NX PX): the built-in token lock stays safe, and
// every grant came from the moved node.
func TestClockOffsetTakesNoKeyFromRelativeTTLs(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := harnesstest.ShortConfig(t)
	cfg.Nemesis = []string{nemesis.ClockOffset}
	out := harnesstest.Run(t, cfg)
	r := out.Results
	if r.Verdict != checker.VerdictSafe {
		t.Fatalf("verdict %s, want safe\n%s", r.Verdict, strings.Join(r.Summary(), "\n"))
	}
	if r.Exercised.Count(checker.MomentMovedClockGrants) == 0 {
		t.Fatalf("no grant on the offset node\n%s", strings.Join(r.Summary(), "\n"))
	}
	harnesstest.RequireNoShm(t, out.Dir)
}
