package workloads

import (
	"context"
	"math/rand"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A watchdog's renewals are in the history as its process's background
// events. When the renewer stops (a client pause pauses it), the history
// shows its last renewal, and the key expires no earlier than a TTL after
// that renewal was sent: the Redisson story (#3636, #5698), where the
// holder is never told. Real server; waits are polls with generous
// deadlines, and no duration is asserted but the server's own TTL.
func TestWatchdogRenewalsAreRecorded(t *testing.T) {
	_, rdb := redistest.Start(t)
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	renewals := 0
	rec.Observe(func(op history.Op) {
		if op.Type == history.Background {
			mu.Lock()
			renewals++
			mu.Unlock()
		}
	})
	const ttl = time.Second
	lock, err := locks.NewRedisLock(rdb, locks.Token, "p1")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := lock.TryAcquire(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{cfg: Config{Workload: Renew, RenewMode: RenewWatchdog, TTL: ttl}, env: Env{Rec: rec}, process: 1}
	wl := c.withWatchdog(lease, "k").(*watchdogLease)
	defer wl.StopRenewal()
	poll(t, "three renewals", func() bool { mu.Lock(); defer mu.Unlock(); return renewals >= 3 })
	wl.PauseRenewal() // as a client pause does
	poll(t, "the key to expire", func() bool { return rdb.Exists(ctx, "k").Val() == 0 })
	gone := rec.Now()
	wl.StopRenewal()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := history.ReadFile(rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	var last *history.Op
	for i := range res.Ops {
		op := &res.Ops[i]
		if op.Type != history.Background || op.Process != 1 || op.Key != "k" || op.F != history.Extend {
			t.Fatalf("unexpected event %s", op)
		}
		if op.Time > gone {
			t.Fatalf("renewal %s after the key expired at %d: the renewer did not stop", op, gone)
		}
		if op.Value.Outcome == history.OK {
			last = op
		}
	}
	if last == nil {
		t.Fatalf("no ok renewal among %d", len(res.Ops))
	}
	// Redis counts the TTL from when it ran the PEXPIRE, after the send,
	// in whole milliseconds.
	if expiry := *last.Value.From + int64(ttl); expiry > gone+int64(time.Millisecond) {
		t.Fatalf("the key was gone at %d, before the last renewal (sent at %d) could expire at %d", gone, *last.Value.From, expiry)
	}
	t.Logf("%d renewals; the last sent at %s, the key gone by %s", len(res.Ops), time.Duration(*last.Value.From), time.Duration(gone))
}

func poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lateLocker's leases believe a quarter of the key's TTL, and answer
// every extend only once that belief has passed, but send it then, while
// the key lives on: a correct extend answered ok after the validity it was
// to extend, as a reply delayed past the lease is.
type lateLocker struct{ locks.Locker }

func (l lateLocker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	lease, err := l.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return lateLease{lease, ttl * 3 / 4}, nil
}

type lateLease struct {
	locks.Lease
	short time.Duration
}

func (l lateLease) ValidUntil() time.Time { return l.Lease.ValidUntil().Add(-l.short) }

func (l lateLease) Extend(ctx context.Context, ttl time.Duration) error {
	before := l.ValidUntil()
	for !time.Now().After(before) {
		time.Sleep(time.Until(before) + time.Millisecond)
	}
	return l.Lease.Extend(ctx, ttl)
}

// An ok extend that arrives after the validity it was to extend ends the
// holder's belief, as the checkers count it: the holder releases and the
// cycle ends after that one extend (it went on extending and acting
// before). Real server; the late extend waits for the belief to pass, so
// a slow machine only makes it later, and is sent 1.5 s before the key
// expires.
func TestLateExtendEndsTheCycle(t *testing.T) {
	_, rdb := redistest.Start(t)
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lock, err := locks.NewRedisLock(rdb, locks.Token, "p1")
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	c := &client{cfg: Config{Workload: Renew, RenewMode: RenewExplicit, TTL: ttl, RenewTTLs: [2]float64{3, 3},
		OpTimeout: 10 * time.Second, RetryBackoff: time.Millisecond}, env: Env{Rec: rec}, process: 1, locker: lateLocker{lock}, rng: rand.New(rand.NewSource(1))}
	if crashed := c.renewCycle(context.Background(), "k"); crashed {
		t.Fatal("crashed")
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := history.ReadFile(rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	var fs []string
	for _, op := range res.Ops {
		if op.Type == history.OK {
			fs = append(fs, op.F)
		}
	}
	if want := []string{history.Acquire, history.Extend, history.Release}; !slices.Equal(fs, want) {
		t.Fatalf("ok operations %v, want %v: the holder went on after a late extend", fs, want)
	}
}
