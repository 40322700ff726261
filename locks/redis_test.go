package locks_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func newLock(t *testing.T, c *redis.Client, variant, prefix string) *locks.RedisLock {
	t.Helper()
	l, err := locks.NewRedisLock(c, variant, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestExclusiveAcquireAndRelease(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	for _, variant := range locks.Variants {
		t.Run(variant, func(t *testing.T) {
			key := "k-" + variant
			a, b := newLock(t, c, variant, "a"), newLock(t, c, variant, "b")
			la, err := a.TryAcquire(ctx, key, time.Second)
			if err != nil {
				t.Fatalf("first acquire: %v", err)
			}
			if _, err := b.TryAcquire(ctx, key, time.Second); !errors.Is(err, locks.ErrNotAcquired) {
				t.Fatalf("second acquire while held: got %v, want ErrNotAcquired", err)
			}
			if !locks.Definite(locks.ErrNotAcquired) {
				t.Fatal("ErrNotAcquired must be definite")
			}
			if err := la.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			lb, err := b.TryAcquire(ctx, key, time.Second)
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			lb.Release(ctx)
		})
	}
}

func TestTTLAndValidity(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	cases := []struct {
		variant string
		wantTTL bool
	}{{locks.Token, true}, {locks.SetnxDel, true}, {locks.Fenced, true}, {locks.SetnxNoTTL, false}}
	for _, tc := range cases {
		t.Run(tc.variant, func(t *testing.T) {
			key := "ttl-" + tc.variant
			before := time.Now()
			l, err := newLock(t, c, tc.variant, "a").TryAcquire(ctx, key, 400*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			pttl := c.PTTL(ctx, key).Val()
			if tc.wantTTL {
				if pttl <= 0 || pttl > 400*time.Millisecond {
					t.Fatalf("PTTL %v, want (0, 400ms]", pttl)
				}
				vu := l.ValidUntil()
				if vu.IsZero() || vu.After(before.Add(400*time.Millisecond)) || vu.Before(before.Add(300*time.Millisecond)) {
					t.Fatalf("ValidUntil %v after start, want a little under the TTL", vu.Sub(before))
				}
			} else {
				if pttl != -1 {
					t.Fatalf("PTTL %v, want -1 (no expiry)", pttl)
				}
				if !l.ValidUntil().IsZero() {
					t.Fatal("a lock without TTL must report no validity limit")
				}
			}
		})
	}
}

// The bug the setnx-del lock stands for: a holder whose lease expired
// deletes the next holder's key. The token lock refuses.
func TestReleaseOfAnExpiredLease(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	cases := []struct {
		variant       string
		wantErr       error
		deletesOthers bool
	}{
		{locks.Token, locks.ErrNotHeld, false},
		{locks.Fenced, locks.ErrNotHeld, false},
		{locks.SetnxDel, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.variant, func(t *testing.T) {
			key := "exp-" + tc.variant
			stale, err := newLock(t, c, tc.variant, "a").TryAcquire(ctx, key, 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			var current locks.Lease
			deadline := time.Now().Add(2 * time.Second)
			for current == nil {
				current, err = newLock(t, c, tc.variant, "b").TryAcquire(ctx, key, 5*time.Second)
				if err != nil && !errors.Is(err, locks.ErrNotAcquired) {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("the first lease never expired")
				}
			}
			if err := stale.Release(ctx); !errors.Is(err, tc.wantErr) {
				t.Fatalf("stale release: got %v, want %v", err, tc.wantErr)
			}
			if err := stale.Extend(ctx, time.Second); !errors.Is(err, locks.ErrNotHeld) && tc.variant != locks.SetnxDel {
				t.Fatalf("stale extend: got %v, want ErrNotHeld", err)
			}
			exists := c.Exists(ctx, key).Val() == 1
			if exists == tc.deletesOthers {
				t.Fatalf("after the stale release the current holder's key exists=%v", exists)
			}
		})
	}
}

func TestExtend(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	l, err := newLock(t, c, locks.Token, "a").TryAcquire(ctx, "ext", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	before := l.ValidUntil()
	if err := l.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !l.ValidUntil().After(before.Add(time.Second)) {
		t.Fatal("extend did not move ValidUntil")
	}
	if pttl := c.PTTL(ctx, "ext").Val(); pttl < 4*time.Second {
		t.Fatalf("PTTL after extend %v", pttl)
	}
}

func TestFencesIncreaseWithEveryGrant(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	l := newLock(t, c, locks.Fenced, "a")
	var last int64
	for i := 0; i < 20; i++ {
		lease, err := l.TryAcquire(ctx, "fence", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := lease.Fence()
		if !ok || f <= last {
			t.Fatalf("grant %d: fence %d (ok=%v) after %d", i, f, ok, last)
		}
		last = f
		// A refused acquire must not consume a fence.
		if _, err := l.TryAcquire(ctx, "fence", time.Second); !errors.Is(err, locks.ErrNotAcquired) {
			t.Fatal(err)
		}
		lease.Release(ctx)
	}
	if _, ok := mustAcquire(t, newLock(t, c, locks.Token, "x"), "plain").Fence(); ok {
		t.Fatal("the token lock has no fence")
	}
}

func mustAcquire(t *testing.T, l locks.Locker, key string) locks.Lease {
	t.Helper()
	lease, err := l.TryAcquire(context.Background(), key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// A paused server gives no answer: the outcome is unknown, not a "no".
func TestTimeoutIsUnknown(t *testing.T) {
	s, _ := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DisableIdentity: true,
		ReadTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer s.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := newLock(t, c, locks.Token, "a").TryAcquire(ctx, "paused", time.Second)
	if err == nil || locks.Definite(err) {
		t.Fatalf("acquire on a paused server: got %v, want an unknown outcome", err)
	}
}

func TestServerErrorIsDefinite(t *testing.T) {
	_, c := redistest.Start(t)
	ctx := context.Background()
	c.Set(ctx, "str", "x", 0)
	err := c.Incr(ctx, "str").Err() // ERR value is not an integer
	if err == nil || !locks.Definite(err) {
		t.Fatalf("an error reply must be definite, got %v", err)
	}
}
