package review_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A review tells a broken Go lock from a correct one by mechanism, under
// the long-holds threat: a third of the holds outlast the TTL, so their
// releases come after the lease, every time. A plain DEL then deletes the
// key of whoever holds it next, and the following grant overlaps that
// holder (the runs stop at the first overlap; the time limit only bounds
// a broken harness); a lying release reports success on a key that is
// gone; the token lock's late releases delete nothing and say so.
func TestReviewOfGoLocks(t *testing.T) {
	redistest.RequireBinary(t)
	cases := []struct {
		name      string
		lock      string
		wrap      func(locks.Locker) locks.Locker
		timeLimit time.Duration
		verdict   string
		kind      string
	}{
		{"setnx-del", locks.SetnxDel, nil, 30 * time.Second, review.LockBroken, checker.MechOverlap},
		{"token with a lying release", locks.Token, func(l locks.Locker) locks.Locker { return harnesstest.LyingRelease{Locker: l} }, 3 * time.Second, review.LockBroken, checker.MechDishonestRelease},
		{"token", locks.Token, nil, 3 * time.Second, review.LockHeld, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := review.Options{
				System: cluster.Single, Lock: tc.lock, Seeds: 1, Budget: 5 * time.Minute, TimeLimit: tc.timeLimit,
				Threats: []string{"long-holds"}, Store: filepath.Join(dir, "store"), Out: filepath.Join(dir, "review"),
			}
			if tc.wrap != nil {
				o.Configure = func(c *harness.Config) {
					name, wrap := c.Lock, tc.wrap
					c.Locker = func(nodes []locks.Conn, process int) (locks.Locker, error) {
						l, err := locks.New(name, nodes, locks.Options{TokenPrefix: fmt.Sprintf("p%d", process)})
						if err != nil {
							return nil, err
						}
						return wrap(l), nil
					}
				}
			}
			r, err := review.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			c := r.Rows[0].Configured
			var kinds []string
			for _, m := range r.Mechanisms {
				kinds = append(kinds, m.Kind)
			}
			if r.LockVerdict != tc.verdict || (tc.kind != "" && !slices.Contains(kinds, tc.kind)) || (tc.kind == "" && len(kinds) > 0) {
				t.Fatalf("lock verdict %s with %v, want %s with %q; cell %s: %s\n%s", r.LockVerdict, kinds, tc.verdict, tc.kind, c.State, c.Note, r.Verdict)
			}
			// The threat happened, whatever the verdict: a holder
			// released after its lease.
			if c.Exercised[checker.MomentStaleActs] == 0 {
				t.Errorf("no stale act counted: %v", c.Exercised)
			}
		})
	}
}

// A lock whose key outlives a crashed holder is broken, by the
// never-frees mechanism: the client-crash threat crashes a holder inside
// its critical section, setnx-nottl's key has no expiry, and every client
// is refused from then on; the run stops at the third refusal 2.5 s after
// the grant (TTL + max(2×TTL, 2 s) and a 5 ms tolerance), whatever the
// load. The same threat
// leaves the token lock held (TestScenarios' token case shows its keys
// expire).
func TestReviewOfALockThatNeverFrees(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	r, err := review.Run(context.Background(), review.Options{
		System: cluster.Single, Lock: locks.SetnxNoTTL, Seeds: 1, Budget: 5 * time.Minute, TimeLimit: 3 * time.Second,
		Threats: []string{"client-crash"}, Store: filepath.Join(dir, "store"), Out: filepath.Join(dir, "review"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Rows[0].Configured
	if r.LockVerdict != review.LockBroken || len(r.Mechanisms) != 1 || r.Mechanisms[0].Kind != checker.MechNeverFrees {
		t.Fatalf("lock verdict %s with %+v, want broken by never-frees; cell %s: %s\n%s", r.LockVerdict, r.Mechanisms, c.State, c.Note, r.Verdict)
	}
	if !strings.Contains(r.Verdict, "never frees") || c.LockState != review.StateUnsafe || c.Exercised[checker.MomentHolderCrashes] == 0 {
		t.Errorf("verdict %q, lock state %s, exercised %v", r.Verdict, c.LockState, c.Exercised)
	}
	t.Log(r.Verdict)
}
