// Package review_test runs the five Python lock clients of examples/review,
// written from docs/client-protocol.md alone, on a single Redis through the
// harness, each under the fault that exposes its bug, and checks what the
// run found by mechanism (checker.Answers), not by its words. The correct
// token lock runs under the same faults and must be found not at fault.
package review_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/harnesstest"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/workloads"
)

func TestMain(m *testing.M) { harnesstest.Main(m) }

// A fault, with the dangerous moment it makes. A correct lock's run under
// it must show the moment, counted from what the run recorded, or its
// clean answer would say nothing.
type fault struct {
	name   string
	edit   func(*harness.Config)
	moment func(*testing.T, *harness.Outcome) (n int, what string)
}

// refused counts the correct lock's definite refusals of f: a release of a
// key that had expired, an extend after a pause past the lease.
func refused(f string) func(*testing.T, *harness.Outcome) (int, string) {
	return func(_ *testing.T, out *harness.Outcome) (int, string) {
		return out.Results.Stats.Counts[f][string(history.Fail)], f + "s refused (not-held)"
	}
}

// slowGrants counts the ok grants whose reply came later after the
// client's own start stamp than the lease model's tolerance: where a lock
// counting its validity from the reply would be judged over-claiming.
func slowGrants(t *testing.T, out *harness.Outcome) (int, string) {
	tol := int64(checker.LeaseTolerance(out.Config.TTL))
	n := 0
	for _, op := range harnesstest.ReadHistory(t, out.Dir).Ops {
		if op.F == history.Acquire && op.Type == history.OK && op.Value != nil && op.Value.Started != nil &&
			op.Time-*op.Value.Started > tol {
			n++
		}
	}
	return n, fmt.Sprintf("grants whose reply came over %s after the client's start", time.Duration(tol))
}

// spareCores is the longest wait after a refused acquire in the mutex
// runs (2 ms by default): ten Python clients retrying a held key as fast as
// they can keep two cores busy, and the seven runs go in parallel. None of
// the mechanisms needs faster retries.
const spareCores = 10 * time.Millisecond

var (
	// Slow network: every reply on the client links 50 ms (±10) late for
	// the whole phase, and holds of 400-450 ms of a 500 ms TTL, so that
	// releases land near the end of the lease. A release that compares in
	// the client (GET, then DEL) runs its GET before its key expires and
	// its DEL after, when the next holder has the key: an overlap, which
	// stops the run. A lock that counts its validity from the reply
	// claims at least the reply's 50 ms more than the TTL allows, on its
	// first grant under the fault.
	slowNetwork = fault{"slow network", func(c *harness.Config) {
		c.Workload, c.Nemesis, c.Targets = workloads.Mutex, []string{nemesis.Latency}, nemesis.TargetOne
		c.Latency, c.Jitter = 50*time.Millisecond, 10*time.Millisecond
		c.Hold, c.NemesisInterval, c.FaultDuration = "400ms..450ms", 100*time.Millisecond, 10*time.Minute
		c.RetryBackoff = spareCores
	}, slowGrants}
	// Long holds: 30% of holds outlast their lease by TTL/2, and each
	// ends with a release of a key that has expired. A correct release
	// says not-held; one that answers ok whatever it found is dishonest.
	longHolds = fault{"long holds", func(c *harness.Config) {
		c.Workload, c.LongHoldRate, c.RetryBackoff = workloads.Mutex, 0.3, spareCores
	}, refused(history.Release)}
	// Renewal under client pauses: a holder renewing every TTL/3 is
	// stopped (SIGSTOP) past its lease + TTL/2; another of the three
	// clients takes the expired key, and the paused holder's next extend
	// finds it. An extend that PEXPIREs without a token check succeeds on
	// the other client's key: dishonest.
	renewal = fault{"renewal under client-pause", func(c *harness.Config) {
		c.Workload, c.RenewFor, c.Clients = workloads.Renew, "3..5", 3
		c.Nemesis, c.NemesisInterval = []string{nemesis.ClientPause}, 100*time.Millisecond
	}, refused(history.Extend)}
)

// The clients, each with the fault that exposes its bug and the mechanism
// the run must find; the correct lock with every fault and none found.
func TestReviewClients(t *testing.T) {
	redistest.RequireBinary(t)
	if out, err := exec.Command("/usr/bin/python3", "-c", "import redis").CombinedOutput(); err != nil {
		msg := "Debian's python3-redis is missing: " + strings.TrimSpace(string(out)) + "; run bash scripts/deps"
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cases := []struct {
		client string
		fault  fault
		// kind and cause are the mechanism a buggy client must show; ""
		// for the correct lock, which must show none.
		kind, cause string
		// limit is the fault phase. Only an overlap stops a run early, so
		// the GET-then-DEL case stops at its first and has
		// UnsafeTimeLimit to find it; the others run a fixed time, long
		// enough for their mechanism to fire several times over (measured
		// on a loaded 2-core machine: 3 s of slow network gave 7-8 grants,
		// each over-claiming; 3 s of long holds 26 holds and 6 dishonest
		// releases; 6 s of renewal 7-11 dishonest extends).
		limit time.Duration
	}{
		{"getdel_release.py", slowNetwork, checker.MechOverlap, checker.CauseForeignRelease, harnesstest.UnsafeTimeLimit},
		{"late_stamp.py", slowNetwork, checker.MechOverClaim, "", 3 * time.Second},
		{"lying_release.py", longHolds, checker.MechDishonestRelease, "", 4 * time.Second},
		{"blind_extend.py", renewal, checker.MechDishonestExtend, "", 6 * time.Second},
		{"token_lock.py", slowNetwork, "", "", 5 * time.Second},
		{"token_lock.py", longHolds, "", "", 4 * time.Second},
		{"token_lock.py", renewal, "", "", 6 * time.Second},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.client, ".py")+", "+c.fault.name, func(t *testing.T) {
			t.Parallel()
			script, err := filepath.Abs(c.client)
			if err != nil {
				t.Fatal(err)
			}
			cfg := harnesstest.ShortConfig(t)
			cfg.Client = []string{"/usr/bin/python3", script}
			c.fault.edit(&cfg)
			cfg.TimeLimit, cfg.Recovery, cfg.Expect = c.limit, 500*time.Millisecond, harness.ExpectSafe
			if c.kind != "" {
				cfg.Expect = harness.ExpectUnsafe
				cfg.StopOnFirstViolation = c.kind == checker.MechOverlap
			}
			start := time.Now()
			out := harnesstest.Run(t, cfg)
			r := out.Results
			took := time.Since(start).Round(100 * time.Millisecond)
			summary := strings.Join(r.Summary(), "\n")
			if r.HarnessFailed() {
				t.Fatalf("harness failure: %q\n%s", r.Errors, summary)
			}
			a := r.Answers
			if a == nil {
				t.Fatalf("no answers\n%s", summary)
			}
			if c.kind == "" {
				// The correct lock: nothing of the lock's, although the
				// run reached the moment that exposes the others.
				if a.Lock != checker.AnswerNotFound {
					t.Fatalf("the correct lock was found at fault (%s)\n%s", kinds(a.Mechanisms), summary)
				}
				n, what := c.fault.moment(t, out)
				if n == 0 {
					t.Fatalf("no %s: the run never reached the moment the fault is for\n%s", what, summary)
				}
				t.Logf("took %s: lock %s in %d holds, with %d %s", took, a.Lock, r.Exclusion.Holds, n, what)
				return
			}
			i := slices.IndexFunc(a.Mechanisms, func(m checker.Mechanism) bool {
				return m.Kind == c.kind && (c.cause == "" || m.Cause == c.cause)
			})
			if a.Lock != checker.AnswerUnsafe || i < 0 {
				t.Fatalf("lock %s with mechanisms %s; want %s %s\n%s", a.Lock, kinds(a.Mechanisms), c.kind, c.cause, summary)
			}
			t.Logf("took %s: lock %s by %s; %s", took, a.Lock, kinds(a.Mechanisms), a.Mechanisms[i].Example)
		})
	}
}

// kinds lists mechanisms as kind/cause×count.
func kinds(ms []checker.Mechanism) string {
	var s []string
	for _, m := range ms {
		k := m.Kind
		if m.Cause != "" {
			k += "/" + m.Cause
		}
		s = append(s, fmt.Sprintf("%s×%d", k, m.Count))
	}
	return "[" + strings.Join(s, " ") + "]"
}
