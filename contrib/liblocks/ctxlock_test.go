package liblocks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// contextLocks are the locks whose holder's belief is the library's
// context (rueidislock's design).
var contextLocks = []string{liblocks.RueidislockName, liblocks.Rueidislock1Name, liblocks.ValkeylockName, liblocks.Valkeylock1Name}

// libraryKeys are a context lock's keys of name on the server.
func libraryKeys(lock, name string) []string {
	prefix, n := "rueidislock", 3
	if lock == liblocks.ValkeylockName || lock == liblocks.Valkeylock1Name {
		prefix = "valkeylock"
	}
	if lock == liblocks.Rueidislock1Name || lock == liblocks.Valkeylock1Name {
		n = 1
	}
	var keys []string
	for i := 0; i < n; i++ {
		keys = append(keys, fmt.Sprintf("%s:%d:%s", prefix, i, name))
	}
	return keys
}

// waitActs reads the lease's acts until the revocation, their end, or
// (untilRenewed) the first renewal that succeeded, for at most a loaded
// machine's generous deadline.
func waitActs(t *testing.T, acts <-chan locks.Act, untilRenewed bool) (renewed int, ended string, closed bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case a, ok := <-acts:
			if !ok {
				return renewed, ended, true
			}
			if a.Ended != "" {
				return renewed, a.Ended, false
			}
			if a.Err != nil {
				t.Logf("renewal failed: %v", a.Err)
			}
			if a.Err == nil && a.TTL > 0 {
				if renewed++; untilRenewed {
					return renewed, "", false
				}
			}
		case <-deadline:
			t.Fatalf("no revocation nor end of the acts within 30 s (%d renewals)", renewed)
		}
	}
}

// The context locks on a real redis-server: the holder's belief ends when
// the library learns its keys are gone (a notification) or a renewal runs
// out of time on a paused server (its deadline), and the adapter says
// which; a holder that releases first sees no revocation.
func TestContextLocks(t *testing.T) {
	redistest.RequireBinary(t)
	ctx := context.Background()
	cases := []struct {
		name string
		ttl  time.Duration
		// act does to the server what ends the belief; nil: the holder
		// releases after a renewal.
		act      func(t *testing.T, srv *local.Server, rdb *redis.Client, keys []string) func()
		wantEnd  string
		released error
	}{
		{name: "keys deleted", ttl: 5 * time.Second, wantEnd: history.EndedNotification, released: locks.ErrNotHeld,
			act: func(t *testing.T, srv *local.Server, rdb *redis.Client, keys []string) func() {
				if err := rdb.Del(ctx, keys...).Err(); err != nil {
					t.Fatalf("DEL %v: %v", keys, err)
				}
				return func() {}
			}},
		{name: "server paused past the deadline", ttl: time.Second, wantEnd: history.EndedDeadline, released: locks.ErrNotHeld,
			act: func(t *testing.T, srv *local.Server, rdb *redis.Client, _ []string) func() {
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
				return func() { srv.Resume() }
			}},
		{name: "released while live", ttl: 400 * time.Millisecond},
	}
	for _, lock := range contextLocks {
		for _, c := range cases {
			t.Run(lock+"/"+c.name, func(t *testing.T) {
				srv, rdb := redistest.Start(t)
				conns := []locks.Conn{{Name: "n1", Client: rdb}}
				l, other := build(t, lock, conns, "a"), build(t, lock, conns, "b")
				le, err := l.TryAcquire(ctx, "k", c.ttl)
				if err != nil {
					t.Fatalf("acquire: %v", err)
				}
				if _, err := other.TryAcquire(ctx, "k", c.ttl); !errors.Is(err, locks.ErrNotAcquired) || !locks.Definite(err) {
					t.Fatalf("a second acquire while held: %v, want ErrNotAcquired", err)
				}
				if !le.ValidUntil().IsZero() {
					t.Fatalf("a live context's ValidUntil is %v, want none", le.ValidUntil())
				}
				acts := le.(locks.Revocable).Acts()
				if c.act == nil {
					waitActs(t, acts, true)
					if err := le.Release(ctx); err != nil {
						t.Fatalf("release: %v", err)
					}
					if _, ended, _ := waitActs(t, acts, false); ended != "" {
						t.Fatalf("a released lease was revoked (%s)", ended)
					}
					if n := rdb.Exists(ctx, libraryKeys(lock, "k")...).Val(); n != 0 {
						t.Fatalf("%d of its keys left after the release", n)
					}
					return
				}
				defer c.act(t, srv, rdb, libraryKeys(lock, "k"))()
				_, ended, closed := waitActs(t, acts, false)
				if closed || ended != c.wantEnd {
					t.Fatalf("the context ended by %q (acts closed without a revocation: %v), want %q", ended, closed, c.wantEnd)
				}
				if le.ValidUntil().IsZero() {
					t.Fatal("an ended context still reports no deadline")
				}
				if err := le.Release(ctx); !errors.Is(err, c.released) {
					t.Fatalf("release after the revocation: %v, want %v", err, c.released)
				}
			})
		}
	}
}
