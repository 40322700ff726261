package harness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// Locks with bugs modelled on real ones, each wrapping a correct lock and
// changing only what the bug changed.

// lateStart counts its validity from after the grant's reply instead of
// from before the request, as pottery once did and node-redlock's beta did
// (and a naive Redlock that forgets the time spent acquiring).
type lateStart struct{ locks.Locker }

func (l lateStart) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	lease, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return lateLease{lease, time.Now().Add(ttl - locks.Drift(ttl, 0.01))}, nil
}

type lateLease struct {
	locks.Lease
	validUntil time.Time
}

func (l lateLease) ValidUntil() time.Time { return l.validUntil }

// leaseRedlockNodeTimeout is the per-node budget of the redlock cases,
// instead of the default min(TTL/10, 50 ms). With the paused node's SET
// always waiting out the budget, a 50 ms stall on either live node left
// no majority: on a saturated CI run (2026-12-06) all 76 acquires of "redlock
// ignoring the elapsed time, a node paused" failed or came back unknown,
// and with no grant there was nothing to judge. 200 ms still leaves each
// grant about 290 ms of its 500 ms TTL, and the paused node's SET still
// costs each acquire the whole budget, which the faulty lock ignores.
const leaseRedlockNodeTimeout = 200 * time.Millisecond

// builtLock wraps the named built-in lock for each client.
func builtLock(name string, wrap func(locks.Locker) locks.Locker) harness.LockerFactory {
	return func(nodes []locks.Conn, process int) (locks.Locker, error) {
		opts := locks.Options{TokenPrefix: fmt.Sprintf("p%d", process)}
		if name == locks.RedlockName {
			opts.NodeTimeout = leaseRedlockNodeTimeout
		}
		l, err := locks.New(name, nodes, opts)
		if err != nil || wrap == nil {
			return l, err
		}
		return wrap(l), nil
	}
}

// TestLeaseModelOnRealServers runs the lease model's checks on real
// servers. Each faulty case's mechanism makes its finding certain, with
// no overlap needed: the fault starts within 150 ms and lasts the whole
// run, so every grant after it is over-claimed (latency on every link,
// or a paused node the Redlock acquire waits out); every hold outlasts the
// TTL, so every release is invoked after the key expired. The correct
// locks run under the same faults and must never be flagged.
func TestLeaseModelOnRealServers(t *testing.T) {
	redistest.RequireBinary(t)
	type want struct{ overClaims, dishonest bool }
	cases := []struct {
		name   string
		system string
		lock   string
		wrap   func(locks.Locker) locks.Locker
		faults []string
		long   bool
		seed   int64
		want   want
	}{
		{name: "validity from the reply, client-link latency, seed 1", system: cluster.Single, lock: locks.Token, seed: 1,
			wrap: func(l locks.Locker) locks.Locker { return lateStart{l} }, faults: []string{nemesis.Latency}, want: want{overClaims: true}},
		{name: "validity from the reply, client-link latency, seed 2", system: cluster.Single, lock: locks.Token, seed: 2,
			wrap: func(l locks.Locker) locks.Locker { return lateStart{l} }, faults: []string{nemesis.Latency}, want: want{overClaims: true}},
		{name: "validity from the reply, client-link latency, seed 3", system: cluster.Single, lock: locks.Token, seed: 3,
			wrap: func(l locks.Locker) locks.Locker { return lateStart{l} }, faults: []string{nemesis.Latency}, want: want{overClaims: true}},
		{name: "correct token lock, client-link latency", system: cluster.Single, lock: locks.Token, faults: []string{nemesis.Latency}},
		{name: "redlock ignoring the elapsed time, a node paused", system: cluster.Redlock, lock: locks.RedlockName,
			wrap: func(l locks.Locker) locks.Locker { return lateStart{l} }, faults: []string{nemesis.Pause}, want: want{overClaims: true}},
		{name: "correct redlock, a node paused", system: cluster.Redlock, lock: locks.RedlockName, faults: []string{nemesis.Pause}},
		{name: "release that reports success without checking, long holds", system: cluster.Single, lock: locks.Token,
			wrap: func(l locks.Locker) locks.Locker { return harnesstest.LyingRelease{Locker: l} }, long: true, want: want{dishonest: true}},
		{name: "redlock wrapper whose Unlock always succeeds, long holds", system: cluster.Redlock, lock: locks.RedlockName,
			wrap: func(l locks.Locker) locks.Locker { return harnesstest.LyingRelease{Locker: l} }, long: true, want: want{dishonest: true}},
		{name: "correct token lock, long holds", system: cluster.Single, lock: locks.Token, long: true},
		{name: "correct redlock, long holds", system: cluster.Redlock, lock: locks.RedlockName, long: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := harnesstest.ShortConfig(t)
			cfg.System, cfg.Lock, cfg.Nemesis = c.system, c.lock, c.faults
			cfg.Locker = builtLock(c.lock, c.wrap)
			cfg.TimeLimit, cfg.Recovery = 3*time.Second, 0
			// One fault, from ~0.1 s to the end of the fault phase.
			cfg.NemesisInterval, cfg.FaultDuration = 100*time.Millisecond, time.Minute
			cfg.Latency, cfg.Jitter = 100*time.Millisecond, 0
			// 100 ms each way leaves a round trip 50 ms short of the
			// default 250 ms op timeout: on a loaded CI machine every
			// acquire came back unknown (0 claims judged). What is judged
			// here is the belief in each grant, not how fast it came.
			cfg.OpTimeout = time.Second
			if c.long {
				cfg.LongHoldRate = 1
			}
			if c.seed != 0 {
				cfg.Seed = c.seed
			}
			cfg.Expect = harness.ExpectAny
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Results
			l := r.Lease
			summary := strings.Join(r.Summary(), "\n")
			if got := l.OverClaims > 0; got != c.want.overClaims {
				t.Errorf("over-claims %d of %d claims, want any: %v\n%s", l.OverClaims, l.Claims, c.want.overClaims, summary)
			}
			if got := l.DishonestOps > 0; got != c.want.dishonest {
				t.Errorf("dishonest %d of %d judged, want any: %v\n%s", l.DishonestOps, l.Judged, c.want.dishonest, summary)
			}
			t.Logf("%d claims, %d over-claimed; %d releases and extends judged, %d dishonest; verdict %s", l.Claims, l.OverClaims, l.Judged, l.DishonestOps, r.Verdict)
			bad := c.want.overClaims || c.want.dishonest
			if bad && r.Verdict != checker.VerdictUnsafe {
				t.Errorf("verdict %s, want unsafe\n%s", r.Verdict, summary)
			}
			if !bad && l.Claims == 0 {
				t.Errorf("nothing was judged: %d claims\n%s", l.Claims, summary)
			}
		})
	}
}

// getThenDel releases with a GET, a compare in the client, then a DEL: the
// old redis-py bug. A DEL delayed past the key's expiry deletes the next
// holder's key.
type getThenDel struct {
	locks.Locker
	client redis.UniversalClient
}

func (l getThenDel) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	lease, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return getThenDelLease{lease, l.client, key}, nil
}

type getThenDelLease struct {
	locks.Lease
	client redis.UniversalClient
	key    string
}

func (l getThenDelLease) Release(ctx context.Context) error {
	v, err := l.client.Get(ctx, l.key).Result()
	switch {
	case errors.Is(err, redis.Nil) || (err == nil && v != l.Token()):
		return locks.ErrNotHeld
	case err != nil:
		return err
	}
	return l.client.Del(ctx, l.key).Err()
}

// TestWitnessNamesDelayedRelease: with replies delayed by 50 ms and every
// hold lasting 400–450 ms of a 500 ms TTL, a holder's GET runs before its
// key expires and its DEL (sent once the GET's reply is back) after, when
// another client has taken the key: the DEL deletes that client's key and
// a third acquires. Every hold does this, so the run stops at its first
// violation within seconds; it runs on a little so that more witnesses
// are recorded. Every witness must name the release that deleted the key.
func TestWitnessNamesDelayedRelease(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := harnesstest.ShortConfig(t)
	harnesstest.DelayedReleases(&cfg)
	cfg.StopGrace = 3 * time.Second
	cfg.Locker = func(nodes []locks.Conn, process int) (locks.Locker, error) {
		l, err := locks.New(locks.Token, nodes, locks.Options{TokenPrefix: fmt.Sprintf("p%d", process)})
		return getThenDel{l, nodes[0].Client}, err
	}
	r := harnesstest.Run(t, cfg).Results
	if len(r.Exclusion.Violations) == 0 {
		t.Fatalf("no witness\n%s", strings.Join(r.Summary(), "\n"))
	}
	for i, v := range r.Exclusion.Violations {
		named := false
		for _, e := range v.Between {
			named = named || (e.F == history.Release && e.Type != history.Fail)
		}
		if !named || !strings.Contains(v.Story, "Likely cause: process ") {
			t.Errorf("witness %d of %d does not name the release that deleted the key:\n%s", i+1, len(r.Exclusion.Violations), v.Story)
		}
	}
	t.Logf("%d witnesses, each naming the release; the first: %s", len(r.Exclusion.Violations), r.Exclusion.Violations[0].Story)
}
