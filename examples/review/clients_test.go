// Package review_test reviews the five Python lock clients of
// examples/review, written from docs/client-protocol.md alone, on a single
// Redis, each under the threat that exposes its bug, and checks the
// review's answers by mechanism, not by their words. The correct token
// lock runs under the same threats and must be held.
package review_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func TestMain(m *testing.M) { harnesstest.Main(m) }

// requirePython skips (or, in CI, fails) where Debian's python3-redis is
// missing. The clients run under /usr/bin/python3: a python3 earlier on
// PATH (a pyenv shim) may not have Debian's redis module.
func requirePython(t *testing.T) {
	t.Helper()
	redistest.RequireBinary(t)
	if out, err := exec.Command("/usr/bin/python3", "-c", "import redis").CombinedOutput(); err != nil {
		msg := "Debian's python3-redis is missing: " + strings.TrimSpace(string(out)) + "; run bash scripts/deps"
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// The five clients through review.Run, as a team would review its own
// lock: each buggy one under the threat that exposes its bug must be
// called broken by its own mechanism; the correct one, under all three
// threats, must be called held, with each threat exercised (its dangerous
// moment counted), never "not exercised". The verdicts are checked by
// mechanism and state, not by their words.
//
// The mechanisms, with a 500 ms TTL: the slow network delays every reply
// 50 ms (±10) and holds end 50-100 ms before the lease, so a release that
// compares in the client (GET, then DEL) runs its DEL after the key
// expired and the next holder took it (an overlap, which stops the run:
// its 60 s limit only bounds a broken harness), and a lock that counts
// validity from the reply over-claims on every grant under the fault; a
// third of the long holds outlast their lease, so each ends with a release
// of an expired key, which a lying release reports ok; under renewal a
// paused holder's next extend finds another client's key, which an extend
// without a token check lengthens and reports ok. Measured on a loaded
// 2-core machine: 6-11 findings per run for the fixed-time cases.
func TestReviewClients(t *testing.T) {
	requirePython(t)
	cases := []struct {
		client  string
		threats []string
		limit   time.Duration
		// kind and cause are the mechanism a buggy client must show; ""
		// for the correct lock, which must be held.
		kind, cause string
	}{
		{"getdel_release.py", []string{"slow-network"}, harnesstest.UnsafeTimeLimit, checker.MechOverlap, checker.CauseForeignRelease},
		{"late_stamp.py", []string{"slow-network"}, 3 * time.Second, checker.MechOverClaim, ""},
		{"lying_release.py", []string{"long-holds"}, 4 * time.Second, checker.MechDishonestRelease, ""},
		{"blind_extend.py", []string{"renew-pause"}, 6 * time.Second, checker.MechDishonestExtend, ""},
		{"token_lock.py", []string{"slow-network", "long-holds", "renew-pause"}, 5 * time.Second, "", ""},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.client, ".py"), func(t *testing.T) {
			t.Parallel()
			script, err := filepath.Abs(c.client)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			start := time.Now()
			r, err := review.Run(context.Background(), review.Options{
				System: cluster.Single, Client: []string{"/usr/bin/python3", script}, Threats: c.threats,
				Seeds: 1, TimeLimit: c.limit, Budget: 10 * time.Minute,
				Store: filepath.Join(dir, "store"), Out: filepath.Join(dir, "review"),
			})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start).Round(100 * time.Millisecond)
			for _, row := range r.Rows {
				if cell := row.Configured; cell.State == review.StateError {
					t.Fatalf("%s: harness failure: %s", row.Threat, cell.Note)
				}
			}
			if c.kind == "" {
				checkHeld(t, r)
				t.Logf("took %s: %s", took, r.Verdict)
				return
			}
			i := slices.IndexFunc(r.Mechanisms, func(m review.ReviewMechanism) bool {
				return m.Kind == c.kind && (c.cause == "" || m.Cause == c.cause)
			})
			if r.LockVerdict != review.LockBroken || i < 0 {
				t.Fatalf("lock %s with mechanisms %+v; want broken by %s %s\n%s", r.LockVerdict, r.Mechanisms, c.kind, c.cause, r.Verdict)
			}
			if m := r.Mechanisms[i]; m.Example == "" || !slices.Contains(m.Threats, c.threats[0]) {
				t.Errorf("mechanism %+v: no story, or not under %s", m, c.threats[0])
			}
			t.Logf("took %s: %s", took, r.Verdict)
		})
	}
}

// checkHeld wants the correct lock held under every threat, each cell
// exercised by its threat's own moments.
func checkHeld(t *testing.T, r *review.Review) {
	t.Helper()
	if r.LockVerdict != review.LockHeld || len(r.Mechanisms) != 0 || len(r.NotExercised) != 0 {
		t.Fatalf("lock %s, mechanisms %+v, not exercised %v; want held, none, none\n%s", r.LockVerdict, r.Mechanisms, r.NotExercised, r.Verdict)
	}
	for _, row := range r.Rows {
		c := row.Configured
		n := 0
		for _, m := range c.Moments {
			n += c.Exercised[m]
		}
		if c.LockState != review.StateNotFound || n == 0 {
			t.Errorf("%s: lock %s with moments %v of %v", row.Threat, c.LockState, c.Exercised, c.Moments)
		}
	}
}
