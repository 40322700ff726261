package liblocks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// TestQuorum drives redlock and redsync through the node answers that
// decide a Redlock acquisition: grants, NX refusals, Redis error replies
// (a read-only node) and silence (a paused node).
func TestQuorum(t *testing.T) {
	t.Parallel()
	// Long enough that the bound on a failed acquisition below (TTL/4)
	// is several node timeouts.
	const ttl = 10 * time.Second
	type outcome int
	const (
		granted outcome = iota
		refused         // definite ErrNotAcquired
		unknown         // not Definite
	)
	cases := []struct {
		name              string
		paused, readonly  []int
		heldElsewhere     []int
		want              outcome
		wantGrantedBy     []string // redlock only
		wantEmptyAfterwds []int    // nodes that must not keep our key after a failure
	}{
		{name: "all up", want: granted, wantGrantedBy: []string{"n1", "n2", "n3", "n4", "n5"}},
		{name: "2 of 5 paused", paused: []int{3, 4}, want: granted, wantGrantedBy: []string{"n1", "n2", "n3"}},
		{name: "1 held elsewhere 1 paused", heldElsewhere: []int{0}, paused: []int{1}, want: granted,
			wantGrantedBy: []string{"n3", "n4", "n5"}},
		{name: "3 of 5 paused", paused: []int{0, 1, 2}, want: unknown, wantEmptyAfterwds: []int{3, 4}},
		{name: "3 held elsewhere", heldElsewhere: []int{0, 1, 2}, want: refused, wantEmptyAfterwds: []int{3, 4}},
		{name: "3 read-only", readonly: []int{0, 1, 2}, want: refused, wantEmptyAfterwds: []int{3, 4}},
		{name: "2 held elsewhere 1 paused", heldElsewhere: []int{0, 1}, paused: []int{2}, want: unknown,
			wantEmptyAfterwds: []int{3, 4}},
	}
	onBothQuorumLocks(t, func(t *testing.T, lockName string, c *nodeSet, l locks.Locker) {
		ctx := context.Background()
		// Sequential: a pause stops a node for every row.
		for _, tc := range cases {
			key := "q-" + tc.name
			for _, i := range tc.heldElsewhere {
				c.conns[i].Client.Set(ctx, key, "other.1", time.Minute)
			}
			for _, i := range tc.readonly {
				if err := c.conns[i].Client.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
					t.Fatal(err)
				}
			}
			resume := c.pause(t, tc.paused...)

			start := time.Now()
			lease, err := l.TryAcquire(ctx, key, ttl)
			took := time.Since(start)
			t.Logf("%s: %v after %v", tc.name, err, took.Round(time.Millisecond))

			switch tc.want {
			case granted:
				if err != nil {
					t.Errorf("%s: got %v, want a lease", tc.name, err)
					break
				}
				nr, reports := lease.(locks.NodeReporter)
				if lockName == liblocks.RedsyncName && reports {
					t.Errorf("%s: redsync cannot tell which nodes granted, yet its lease reports %v", tc.name, nr.GrantedBy())
				}
				if lockName == locks.RedlockName {
					if !reports || !slices.Equal(nr.GrantedBy(), tc.wantGrantedBy) {
						t.Errorf("%s: granted by %v, want %v", tc.name, grantedBy(lease), tc.wantGrantedBy)
					}
				}
				// redsync's Unlock waits for every node: a paused one
				// costs the whole context.
				rctx, cancel := context.WithTimeout(ctx, 4*testNodeTimeout)
				if err := lease.Release(rctx); err != nil {
					t.Errorf("%s: release: %v", tc.name, err)
				}
				cancel()
			case refused:
				if !errors.Is(err, locks.ErrNotAcquired) || !locks.Definite(err) {
					t.Errorf("%s: got %v, want a definite ErrNotAcquired", tc.name, err)
				}
			case unknown:
				if err == nil || locks.Definite(err) {
					t.Errorf("%s: got %v, want an unknown outcome", tc.name, err)
				}
			}
			// The per-node timeout bounds a failed acquisition (and its
			// release), not the TTL.
			if took > ttl/4 {
				t.Errorf("%s: acquisition took %v with a %v TTL", tc.name, took, ttl)
			}
			if tc.want != granted {
				for _, i := range tc.wantEmptyAfterwds {
					if v := c.values(t, key, i)[0]; v != "" {
						t.Errorf("%s: after the failed quorum %s still has %q", tc.name, c.conns[i].Name, v)
					}
				}
				for _, i := range tc.heldElsewhere {
					if v := c.values(t, key, i)[0]; v != "other.1" {
						t.Errorf("%s: the other holder's key on %s became %q", tc.name, c.conns[i].Name, v)
					}
				}
			}
			resume()
			for _, i := range tc.readonly {
				if err := c.conns[i].Client.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func grantedBy(l locks.Lease) []string {
	if nr, ok := l.(locks.NodeReporter); ok {
		return nr.GrantedBy()
	}
	return nil
}

// stepClock advances by step at every reading: an acquisition then appears
// to take exactly step.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func newRedlock(t *testing.T, c *nodeSet, opts locks.RedlockOptions) *locks.Redlock {
	t.Helper()
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = testNodeTimeout
	}
	l, err := locks.NewRedlock(c.conns, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A client stalled (or whose clock jumped) for longer than the TTL during
// the acquisition must not believe it holds the lock, and must not leave
// its keys behind.
func TestRedlockSlowAcquisitionGivesNoLease(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	ctx := context.Background()
	const ttl = time.Second
	l := newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "slow", Clock: &stepClock{t: time.Now(), step: ttl + 100*time.Millisecond}})
	lease, err := l.TryAcquire(ctx, "slow", ttl)
	if err == nil {
		t.Fatalf("got a lease valid until %v after a %v acquisition", lease.ValidUntil(), ttl+100*time.Millisecond)
	}
	if !errors.Is(err, locks.ErrNotAcquired) || !locks.Definite(err) {
		t.Fatalf("got %v, want a definite ErrNotAcquired (validity ≤ 0)", err)
	}
	if vals := c.values(t, "slow"); count(vals, "") != 5 {
		t.Fatalf("keys left behind after the refused lease: %q", vals)
	}
	// Just within the validity: granted.
	drift := locks.Drift(ttl, 0.01)
	l = newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "ok", Clock: &stepClock{t: time.Now(), step: ttl - drift - 10*time.Millisecond}})
	if _, err := l.TryAcquire(ctx, "slow", ttl); err != nil {
		t.Fatalf("acquisition within the validity: %v", err)
	}
}

// ValidUntil is the real end of the acquisition plus TTL − elapsed − drift,
// elapsed measured on the lock's clock.
func TestRedlockValidity(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	ctx := context.Background()
	const ttl = 2 * time.Second
	drift := locks.Drift(ttl, 0.01)
	if drift != ttl/100+2*time.Millisecond || drift != locks.DefaultDrift(ttl) {
		t.Fatalf("drift %v, want TTL/100 + 2ms", drift)
	}
	cases := []struct {
		name  string
		clock locks.Clock
		// validity after the end of the acquisition; for the real clock,
		// ValidUntil is start + TTL − drift instead.
		validity time.Duration
	}{
		{"real clock", nil, 0},
		{"30ms acquisition", &stepClock{t: time.Now(), step: 30 * time.Millisecond}, ttl - 30*time.Millisecond - drift},
		// A stalled clock sees no elapsed time: the belief grows by however
		// long the acquisition really took (the S5 pause it cannot see).
		{"frozen clock", &stepClock{t: time.Now()}, ttl - drift},
	}
	const tolerance = time.Millisecond
	for i, tc := range cases {
		// A generous node timeout: this is about the validity's
		// arithmetic, and a loaded machine must not turn the acquisition
		// into an unknown outcome.
		l := newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "v", Clock: tc.clock, NodeTimeout: 2 * time.Second})
		key := fmt.Sprintf("valid-%d", i)
		before := time.Now()
		lease, err := l.TryAcquire(ctx, key, ttl)
		after := time.Now()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lo, hi := before.Add(tc.validity), after.Add(tc.validity)
		if tc.clock == nil {
			lo, hi = before.Add(ttl-drift), after.Add(ttl-drift)
		}
		if vu := lease.ValidUntil(); vu.Before(lo.Add(-tolerance)) || vu.After(hi.Add(tolerance)) {
			t.Errorf("%s: ValidUntil at %v after the call began, want within [%v, %v]",
				tc.name, vu.Sub(before), lo.Sub(before), hi.Sub(before))
		}
		// Extend measures the same way.
		before = time.Now()
		if err := lease.Extend(ctx, ttl); err != nil {
			t.Fatalf("%s: extend: %v", tc.name, err)
		}
		after = time.Now()
		lo, hi = before.Add(tc.validity), after.Add(tc.validity)
		if tc.clock == nil {
			lo, hi = before.Add(ttl-drift), after.Add(ttl-drift)
		}
		if vu := lease.ValidUntil(); vu.Before(lo.Add(-tolerance)) || vu.After(hi.Add(tolerance)) {
			t.Errorf("%s: after extend ValidUntil at %v after the call began, want within [%v, %v]",
				tc.name, vu.Sub(before), lo.Sub(before), hi.Sub(before))
		}
	}
}

// Release and extend with nodes down: a minority of answers is enough to
// release (the key is gone where it was deleted), not to extend.
func TestRedlockLeaseWithNodesDown(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	ctx := context.Background()
	l := newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "d"})

	lease, err := l.TryAcquire(ctx, "down", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resume := c.pause(t, 0, 1)
	if err := lease.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("extend with 2 of 5 paused: %v", err)
	}
	if got := grantedBy(lease); !slices.Equal(got, []string{"n3", "n4", "n5"}) {
		t.Fatalf("after extend GrantedBy %v, want the nodes that extended", got)
	}
	resume()

	resume = c.pause(t, 0, 1, 2)
	vu := lease.ValidUntil()
	err = lease.Extend(ctx, 5*time.Second)
	if err == nil || locks.Definite(err) {
		t.Fatalf("extend with 3 of 5 paused: got %v, want an unknown outcome", err)
	}
	if !lease.ValidUntil().Equal(vu) {
		t.Fatal("a failed extend moved ValidUntil")
	}
	// Two deletes are no quorum: whether the lock was still held when it
	// was released depends on the paused nodes, so the outcome is unknown.
	if err := lease.Release(ctx); err == nil || locks.Definite(err) {
		t.Fatalf("release with 3 of 5 paused (2 nodes deleted the key): got %v, want an unknown outcome", err)
	}
	if vals := c.values(t, "down", 3, 4); count(vals, "") != 2 {
		t.Fatalf("keys left on the live nodes: %q", vals)
	}
	resume()
}

func TestRedlockRetries(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := context.Background()
	// The other holder's keys expire 150 ms after their SETs, so no grant
	// can come before set+150ms (less Redis's millisecond rounding),
	// however slow the machine: timed from the SETs, not from the
	// acquire, which a loaded CI machine started 60 ms later.
	set := time.Now()
	for _, cn := range c.conns {
		cn.Client.Set(ctx, "retry", "other.1", 150*time.Millisecond)
		cn.Client.Set(ctx, "forever", "other.2", time.Minute)
	}
	l := newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "r", Tries: 40, RetryDelay: 50 * time.Millisecond})
	if _, err := l.TryAcquire(ctx, "retry", time.Second); err != nil {
		t.Fatalf("retries did not outlast the other holder: %v", err)
	}
	if took := time.Since(set); took < 148*time.Millisecond {
		t.Fatalf("granted %v after the other holder's 150ms keys were set, before they expired", took)
	}

	l = newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "r2", Tries: 3, RetryDelay: 10 * time.Millisecond})
	if _, err := l.TryAcquire(ctx, "forever", time.Second); !errors.Is(err, locks.ErrNotAcquired) || !locks.Definite(err) {
		t.Fatalf("3 refused tries: got %v, want ErrNotAcquired", err)
	}
	// A cancelled context ends the retries.
	l = newRedlock(t, c, locks.RedlockOptions{TokenPrefix: "r3", Tries: 1000, RetryDelay: 20 * time.Millisecond})
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := l.TryAcquire(cctx, "forever", time.Second); err == nil {
		t.Fatal("granted a held lock")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("retries ran %v past a 100ms context", took)
	}
}

// redislock grants a lock to anyone whose token is a prefix of the
// holder's value: why the adapter never reuses a token nor lets one be a
// prefix of another.
func TestRedislockTokenCaveat(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Start(t)
	ctx := context.Background()
	cl := redislock.New(rdb)
	if _, err := cl.Obtain(ctx, "same", time.Second, &redislock.Options{Token: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Obtain(ctx, "same", time.Second, &redislock.Options{Token: "t"}); err != nil {
		t.Fatalf("library behaviour changed: a second client with the same token was refused (%v)", err)
	}
	if _, err := cl.Obtain(ctx, "prefix", time.Second, &redislock.Options{Token: "p1.12"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Obtain(ctx, "prefix", time.Second, &redislock.Options{Token: "p1.1"}); err != nil {
		t.Fatalf("library behaviour changed: a token that prefixes the holder's was refused (%v)", err)
	}

	// The adapter: two clients with the same prefix still get distinct
	// tokens and exclusion.
	a, err := liblocks.NewRedislock(rdb, "p1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := liblocks.NewRedislock(rdb, "p1")
	if err != nil {
		t.Fatal(err)
	}
	la, err := a.TryAcquire(ctx, "adapter", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "adapter", time.Second); !errors.Is(err, locks.ErrNotAcquired) {
		t.Fatalf("same-prefix client while held: got %v, want ErrNotAcquired", err)
	}
	if v := rdb.Get(ctx, "adapter").Val(); v != la.Token() {
		t.Fatalf("key holds %q, lease token %q", v, la.Token())
	}
}

// TestReleaseNeedsQuorum: a multi-node release succeeded only if a quorum
// deleted our key. Nodes that lost the key (a restart without persistence)
// refuse the delete; a paused node leaves its answer unknown.
func TestReleaseNeedsQuorum(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		lost, paused []int
		want         string // "ok", "not held" or "unknown"
	}{
		{name: "all delete", want: "ok"},
		{name: "2 of 5 lost the key", lost: []int{0, 1}, want: "ok"},
		{name: "3 of 5 lost the key", lost: []int{0, 1, 2}, want: "not held"},
		{name: "2 lost 1 paused", lost: []int{0, 1}, paused: []int{2}, want: "unknown"},
	}
	onBothQuorumLocks(t, func(t *testing.T, lockName string, c *nodeSet, l locks.Locker) {
		ctx := context.Background()
		for _, tc := range cases {
			key := "rq-" + tc.name
			lease, err := l.TryAcquire(ctx, key, 10*time.Second)
			if err != nil {
				t.Fatalf("%s: acquire: %v", tc.name, err)
			}
			for _, i := range tc.lost {
				c.conns[i].Client.Del(ctx, key)
			}
			resume := c.pause(t, tc.paused...)
			rctx, cancel := context.WithTimeout(ctx, 4*testNodeTimeout)
			err = lease.Release(rctx)
			cancel()
			resume()
			got := "unknown"
			switch {
			case err == nil:
				got = "ok"
			case errors.Is(err, locks.ErrNotHeld) && locks.Definite(err):
				got = "not held"
			case locks.Definite(err):
				got = "definite " + err.Error()
			}
			if got != tc.want {
				t.Errorf("%s: release gave %q (%v), want %s", tc.name, got, err, tc.want)
			}
		}
	})
}

// onBothQuorumLocks runs fn, in parallel, on each quorum lock (this
// project's redlock and the redsync adapter) over a fresh 5-node cluster.
func onBothQuorumLocks(t *testing.T, fn func(t *testing.T, lockName string, c *nodeSet, l locks.Locker)) {
	for _, lockName := range []string{locks.RedlockName, liblocks.RedsyncName} {
		t.Run(lockName, func(t *testing.T) {
			t.Parallel()
			c := startCluster(t, 5)
			fn(t, lockName, c, build(t, lockName, c.conns, "me"))
		})
	}
}
