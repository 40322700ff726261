package harness_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// twoOfFive is a broken Redlock whose quorum is 2 of 5: it sets the key
// on the nodes in a random order and grants when two did, which another
// client's two others can do at the same time. It reports the nodes that
// granted, as a Redlock does.
type twoOfFive struct {
	nodes  []locks.Conn
	prefix string
	mu     sync.Mutex
	n      int
	rng    *rand.Rand
}

type twoOfFiveLease struct {
	l          *twoOfFive
	key, token string
	by         []locks.Conn
	validUntil time.Time
}

func (l *twoOfFive) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l.mu.Lock()
	l.n++
	token := fmt.Sprintf("%s-%d", l.prefix, l.n)
	order := l.rng.Perm(len(l.nodes))
	l.mu.Unlock()
	start := time.Now()
	le := &twoOfFiveLease{l: l, key: key, token: token, validUntil: start.Add(ttl)}
	for _, i := range order {
		if ok, err := l.nodes[i].Client.SetNX(ctx, key, token, ttl).Result(); err == nil && ok {
			le.by = append(le.by, l.nodes[i])
		}
	}
	if len(le.by) < 2 {
		_ = le.Release(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: %s: %d of %d nodes", locks.ErrNotAcquired, key, len(le.by), len(l.nodes))
	}
	return le, nil
}

func (le *twoOfFiveLease) Token() string         { return le.token }
func (le *twoOfFiveLease) Fence() (int64, bool)  { return 0, false }
func (le *twoOfFiveLease) ValidUntil() time.Time { return le.validUntil }
func (le *twoOfFiveLease) Extend(context.Context, time.Duration) error {
	return fmt.Errorf("%w: no extend", locks.ErrNotHeld)
}

// GrantedBy names the nodes that granted.
func (le *twoOfFiveLease) GrantedBy() []string {
	var names []string
	for _, n := range le.by {
		names = append(names, n.Name)
	}
	return names
}

func (le *twoOfFiveLease) Release(ctx context.Context) error {
	for _, n := range le.by {
		if err := compareAndDelete.Run(ctx, n.Client, []string{le.key}, le.token).Err(); err != nil {
			return err
		}
	}
	return nil
}

// A Redlock with a quorum of 2 of 5, on five independent nodes with no
// fault: its grants by two nodes are counted as minority grants, and the
// first overlap is the lock's minority-grant, not one without a
// server-side cause. The run stops at the first overlap (a generous limit,
// so that a loaded machine only takes longer).
func TestMinorityGrantsOnRealServers(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := scenario.Base()
	scenario.Redlock(locks.RedlockName)(&cfg)
	cfg.Store, cfg.Nemesis, cfg.Hold = t.TempDir(), nil, "20ms..40ms"
	cfg.CustomLockName = "two-of-five"
	cfg.Locker = func(nodes []locks.Conn, process int) (locks.Locker, error) {
		return &twoOfFive{nodes: nodes, prefix: fmt.Sprintf("p%d", process), rng: rand.New(rand.NewSource(int64(process)))}, nil
	}
	harnesstest.UntilViolation(&cfg)
	r := harnesstest.Run(t, cfg).Results
	summary := strings.Join(r.Summary(), "\n")
	t.Log(summary)
	if r.Quorum == nil || r.Quorum.Nodes != 5 || r.Quorum.Minority == 0 || !strings.Contains(r.Quorum.Example, "of 5 nodes, not a majority") {
		t.Fatalf("quorum %+v:\n%s", r.Quorum, summary)
	}
	found := false
	for _, m := range r.Answers.Mechanisms {
		found = found || m.Cause == checker.CauseMinorityGrant
		if m.Cause == checker.CauseNoServerCause {
			t.Errorf("an overlap without a server-side cause: %s", m.Example)
		}
	}
	if !found {
		t.Fatalf("no minority-grant overlap:\n%s", summary)
	}
}
