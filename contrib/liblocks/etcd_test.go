package liblocks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jcluster "github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// startEtcd starts a 3-member etcd cluster for the test and returns its
// members as a lock sees them.
func startEtcd(t *testing.T) []locks.Conn {
	t.Helper()
	redistest.RequireEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := local.StartEtcd(ctx, jcluster.Spec{System: jcluster.Etcd, Nodes: 3, Dir: t.TempDir(), Persistence: jcluster.PersistNone})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(context.Background()) })
	var conns []locks.Conn
	for _, n := range cl.Nodes() {
		conns = append(conns, locks.Conn{Name: n.Name, Addr: n.Addr})
	}
	return conns
}

func etcdLock(t *testing.T, conns []locks.Conn, prefix string) *liblocks.EtcdLock {
	t.Helper()
	l, err := locks.New(liblocks.EtcdName, conns, locks.Options{TokenPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.(*liblocks.EtcdLock).Close() })
	return l.(*liblocks.EtcdLock)
}

// acquire is l's grant of key, which the test needs to go on.
func acquire(t *testing.T, l locks.Locker, key string, ttl time.Duration) locks.Lease {
	t.Helper()
	lease, err := l.TryAcquire(opCtx(t), key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestEtcdLockRegistry(t *testing.T) {
	t.Parallel()
	nc, err := locks.NodesFor(liblocks.EtcdName)
	if err != nil || !nc.Allows(1) || !nc.Allows(3) || nc.Allows(2) {
		t.Errorf("NodesFor(etcd) = %v, %v; want odd counts from 1", nc, err)
	}
	conns := func(n int) []locks.Conn {
		out := make([]locks.Conn, n)
		for i := range out {
			out[i] = locks.Conn{Name: fmt.Sprintf("n%d", i+1), Addr: "127.0.0.1:1"} // never dialled
		}
		return out
	}
	l, err := locks.New(liblocks.EtcdName, conns(3), locks.Options{TokenPrefix: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	l.(*liblocks.EtcdLock).Close()
	if _, err := locks.New(liblocks.EtcdName, conns(2), locks.Options{}); err == nil || !strings.Contains(err.Error(), "odd number") {
		t.Errorf("2 members: %v", err)
	}
	if _, err := locks.New(liblocks.EtcdName, []locks.Conn{{Name: "n1"}}, locks.Options{}); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("no address: %v", err)
	}
	s, err := locks.New(liblocks.EtcdSessionName, conns(3), locks.Options{TokenPrefix: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	s.(*liblocks.EtcdLock).Close()
	if _, err := locks.New(liblocks.EtcdSessionName, []locks.Conn{{Name: "n1"}}, locks.Options{}); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("etcd-session, no address: %v", err)
	}
	if _, err := locks.NodesFor("zookeeper"); err == nil || !strings.Contains(err.Error(), "etcd-session") {
		t.Errorf("the unknown-lock error should list etcd: %v", err)
	}
	for ttl, want := range map[time.Duration]int64{time.Millisecond: 1, 500 * time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 3 * time.Second: 3} {
		if got := liblocks.EtcdLeaseTTL(ttl); got != want {
			t.Errorf("EtcdLeaseTTL(%v) = %d, want %d", ttl, got, want)
		}
	}
	if !locks.Definite(liblocks.ErrGuardFailed) || !errors.Is(liblocks.ErrGuardFailed, locks.ErrNotHeld) {
		t.Error("ErrGuardFailed must be a definite ErrNotHeld")
	}
}

func TestEtcdLock(t *testing.T) {
	t.Parallel()
	conns := startEtcd(t)

	t.Run("exclusive-release-fences", func(t *testing.T) {
		t.Parallel()
		a, b := etcdLock(t, conns, "a"), etcdLock(t, conns, "b")
		var last int64
		for i := range 4 {
			holder, other := a, b
			if i%2 == 1 {
				holder, other = b, a
			}
			start := time.Now()
			l, err := holder.TryAcquire(opCtx(t), "excl", 2*time.Second)
			if err != nil {
				t.Fatalf("grant %d: %v", i, err)
			}
			if v := l.ValidUntil(); v.Before(start.Add(2*time.Second-30*time.Millisecond)) || v.After(start.Add(2*time.Second)) {
				t.Errorf("grant %d: valid until %v after start, want 2s minus the margin", i, v.Sub(start))
			}
			f, ok := l.Fence()
			if !ok || f <= last {
				t.Errorf("grant %d: fence %d, previous %d", i, f, last)
			}
			last = f
			_, err = other.TryAcquire(opCtx(t), "excl", 2*time.Second)
			if !errors.Is(err, locks.ErrNotAcquired) || !locks.Definite(err) {
				t.Fatalf("grant %d: acquire while held: %v, want a definite ErrNotAcquired", i, err)
			}
			if err := l.Release(opCtx(t)); err != nil {
				t.Fatalf("grant %d: release: %v", i, err)
			}
			if err := l.Release(opCtx(t)); !errors.Is(err, locks.ErrNotHeld) {
				t.Errorf("grant %d: second release: %v, want ErrNotHeld", i, err)
			}
			if err := l.Extend(opCtx(t), time.Second); !errors.Is(err, locks.ErrNotHeld) {
				t.Errorf("grant %d: extend after release: %v, want ErrNotHeld", i, err)
			}
		}
	})

	// The etcd-session lock renews its lease in the background: the key
	// outlives the TTL for as long as the holder runs, and the holder's
	// belief has no deadline until the session ends.
	t.Run("session-keep-alive", func(t *testing.T) {
		t.Parallel()
		sessionLock := func(prefix string) *liblocks.EtcdLock {
			l, err := locks.New(liblocks.EtcdSessionName, conns, locks.Options{TokenPrefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.(*liblocks.EtcdLock).Close() })
			return l.(*liblocks.EtcdLock)
		}
		a, b := sessionLock("a"), sessionLock("b")
		la := acquire(t, a, "session", time.Second)
		if !la.ValidUntil().IsZero() {
			t.Fatalf("a live session's belief has no deadline, got %v", la.ValidUntil())
		}
		// Three TTLs later the key is still a's: the keep-alive works.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if _, err := b.TryAcquire(opCtx(t), "session", time.Second); !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatalf("b while a's session is alive: %v, want ErrNotAcquired", err)
			}
		}
		if !la.ValidUntil().IsZero() {
			t.Fatalf("a's session ended while a ran: %v", la.ValidUntil())
		}
		// The lease ends under a (as when a stalls past the TTL): the
		// session sees it and the belief is over; b gets the lock.
		if _, err := a.Client().Revoke(opCtx(t), la.(*liblocks.EtcdLease).LeaseID()); err != nil {
			t.Fatal(err)
		}
		var lb locks.Lease
		var err error
		for deadline := time.Now().Add(3 * time.Second); lb == nil; time.Sleep(20 * time.Millisecond) {
			if lb, err = b.TryAcquire(opCtx(t), "session", time.Second); err != nil && !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("b did not get the lock after a's lease was revoked")
			}
		}
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if v := la.ValidUntil(); !v.IsZero() && v.Before(time.Now()) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a's session did not end after its lease was revoked")
			}
		}
		fa, _ := la.Fence()
		fb, _ := lb.Fence()
		if fb <= fa {
			t.Errorf("fence of b %d ≤ fence of a %d", fb, fa)
		}
		if err := la.Release(opCtx(t)); !errors.Is(err, locks.ErrNotHeld) {
			t.Errorf("release of the lost lock: %v, want ErrNotHeld", err)
		}
		// Release stops the keep-alive and frees the key at once.
		if err := lb.Release(opCtx(t)); err != nil {
			t.Fatal(err)
		}
		lc, err := a.TryAcquire(opCtx(t), "session", time.Second)
		if err != nil {
			t.Fatalf("acquire right after b's release: %v", err)
		}
		if err := lc.Release(opCtx(t)); err != nil {
			t.Error(err)
		}
	})

	t.Run("expiry-and-guarded-put", func(t *testing.T) {
		t.Parallel()
		a, b := etcdLock(t, conns, "a"), etcdLock(t, conns, "b")
		la := acquire(t, a, "expiry", time.Second)
		if err := liblocks.GuardedPut(opCtx(t), a.Client(), la.(*liblocks.EtcdLease), "resource/expiry", "a1"); err != nil {
			t.Fatalf("the holder's guarded put: %v", err)
		}
		// a stalls: no keep-alive, so its lease runs out and b gets in.
		var lb locks.Lease
		var err error
		for lb == nil {
			if lb, err = b.TryAcquire(opCtx(t), "expiry", time.Second); err != nil && !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatal(err)
			}
			if time.Since(la.ValidUntil()) > 3*time.Second {
				t.Fatal("a's lease did not expire")
			}
			time.Sleep(20 * time.Millisecond)
		}
		grantedB := time.Now()
		if grantedB.Before(la.ValidUntil()) {
			t.Errorf("b got the lock %v before a's belief ended: the belief is unsafe", la.ValidUntil().Sub(grantedB))
		}
		t.Logf("b acquired %v after a's belief ended", grantedB.Sub(la.ValidUntil()).Round(time.Millisecond))
		fa, _ := la.Fence()
		fb, _ := lb.Fence()
		if fb <= fa {
			t.Errorf("fence of b %d ≤ fence of a %d", fb, fa)
		}

		// a wakes up and writes. Guarded: refused, definitely.
		err = liblocks.GuardedPut(opCtx(t), a.Client(), la.(*liblocks.EtcdLease), "resource/expiry", "a2")
		if !errors.Is(err, liblocks.ErrGuardFailed) || !locks.Definite(err) {
			t.Fatalf("stale guarded put: %v, want a definite ErrGuardFailed", err)
		}
		if err := liblocks.GuardedPut(opCtx(t), b.Client(), lb.(*liblocks.EtcdLease), "resource/expiry", "b1"); err != nil {
			t.Fatalf("the new holder's guarded put: %v", err)
		}
		// Unguarded, the same stale write goes through over b's.
		if _, err := a.Client().Put(opCtx(t), "resource/expiry", "a2"); err != nil {
			t.Fatal(err)
		}
		r, err := b.Client().Get(opCtx(t), "resource/expiry")
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "a2" {
			t.Fatalf("the unguarded stale write should have overwritten b's: %v %v", r, err)
		}
		if err := la.Release(opCtx(t)); !errors.Is(err, locks.ErrNotHeld) {
			t.Errorf("release of the expired lease: %v, want ErrNotHeld", err)
		}
		if err := la.Extend(opCtx(t), time.Second); !errors.Is(err, locks.ErrNotHeld) {
			t.Errorf("extend of the expired lease: %v, want ErrNotHeld", err)
		}
		if err := lb.Release(opCtx(t)); err != nil {
			t.Error(err)
		}
	})

	t.Run("extend-keeps-it", func(t *testing.T) {
		t.Parallel()
		a, b := etcdLock(t, conns, "a"), etcdLock(t, conns, "b")
		la := acquire(t, a, "extend", time.Second)
		for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); {
			time.Sleep(300 * time.Millisecond)
			before := time.Now()
			if err := la.Extend(opCtx(t), time.Second); err != nil {
				t.Fatalf("extend: %v", err)
			}
			if v := la.ValidUntil(); v.Before(before.Add(time.Second - 20*time.Millisecond)) {
				t.Errorf("after extend, valid for %v only", v.Sub(before))
			}
			if _, err := b.TryAcquire(opCtx(t), "extend", time.Second); !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatalf("acquire of an extended lock: %v", err)
			}
		}
		if err := la.Release(opCtx(t)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("short-ttl-rounds-up", func(t *testing.T) {
		t.Parallel()
		a := etcdLock(t, conns, "a")
		start := time.Now()
		l := acquire(t, a, "short", 300*time.Millisecond)
		e := l.(*liblocks.EtcdLease)
		if e.GrantedTTL() != time.Second {
			t.Errorf("granted %v, want 1s", e.GrantedTTL())
		}
		if v := l.ValidUntil().Sub(start); v > 300*time.Millisecond || v < 290*time.Millisecond {
			t.Errorf("belief %v, want the asked 300ms minus the margin", v)
		}
		l.Release(opCtx(t))
	})

	t.Run("contention", func(t *testing.T) {
		t.Parallel()
		var inside atomic.Int32
		var mu sync.Mutex
		var fences []int64
		var wg sync.WaitGroup
		// Contention until ten grants, however slow the machine: the
		// deadline only bounds a broken lock (a CI run under load saw 7
		// grants in a fixed 1.5 s).
		const want = 10
		var granted atomic.Int32
		deadline := time.Now().Add(60 * time.Second)
		for w := range 4 {
			l := etcdLock(t, conns, fmt.Sprintf("w%d", w))
			wg.Go(func() {
				for granted.Load() < want && time.Now().Before(deadline) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					lease, err := l.TryAcquire(ctx, "contended", 2*time.Second)
					cancel()
					if err != nil {
						if !errors.Is(err, locks.ErrNotAcquired) {
							t.Errorf("acquire: %v", err)
							return
						}
						time.Sleep(time.Millisecond)
						continue
					}
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d holders at once", n)
					}
					f, _ := lease.Fence()
					mu.Lock()
					fences = append(fences, f)
					mu.Unlock()
					granted.Add(1)
					time.Sleep(2 * time.Millisecond)
					inside.Add(-1)
					ctx, cancel = context.WithTimeout(context.Background(), time.Second)
					if err := lease.Release(ctx); err != nil {
						t.Errorf("release: %v", err)
					}
					cancel()
				}
			})
		}
		wg.Wait()
		if len(fences) < want {
			t.Errorf("only %d of %d grants in 60 s", len(fences), want)
		}
		for i := 1; i < len(fences); i++ {
			if fences[i] <= fences[i-1] {
				t.Errorf("grant %d: fence %d after %d", i, fences[i], fences[i-1])
			}
		}
		t.Logf("%d grants", len(fences))
	})
}
