package locks_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// slowDialer opens real connections, each after delay: the reconnect of a
// loaded machine (go-redis's HELLO rides on the new connection too),
// made longer than the node budget on purpose.
type slowDialer struct {
	delay time.Duration
	dials atomic.Int32
}

func (d *slowDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// A node whose connection must first be opened is not unavailable: Redlock
// opens connections before its clock and its node budget start, so that
// the budget covers the command's round trip. Every dial here takes four
// times the node budget, so a budget that covered the dial (as it did)
// finds no node in time and the acquisition's outcome is unknown; no
// assertion is about how long anything took.
func TestRedlockColdConnectionsAreNotUnavailable(t *testing.T) {
	const nodeTimeout, dialDelay = 500 * time.Millisecond, 2 * time.Second
	var conns []locks.Conn
	var dialers []*slowDialer
	for i := 1; i <= 3; i++ {
		s, _ := redistest.Start(t)
		d := &slowDialer{delay: dialDelay}
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DisableIdentity: true,
			ContextTimeoutEnabled: true, DialTimeout: time.Minute, PoolSize: 2, Dialer: d.dial})
		t.Cleanup(func() { c.Close() })
		conns = append(conns, locks.Conn{Name: fmt.Sprintf("n%d", i), Client: c})
		dialers = append(dialers, d)
	}
	// ConnectTimeout far above the dial delay: a loaded machine must not
	// make the opening itself fail.
	l, err := locks.NewRedlock(conns, locks.RedlockOptions{TokenPrefix: "p", NodeTimeout: nodeTimeout, ConnectTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ttl = time.Minute // the validity must not run out on a loaded machine
	lease, err := l.TryAcquire(ctx, "k", ttl)
	if err != nil {
		t.Fatalf("acquire on cold connections: %v", err)
	}
	// A quorum was waited for; the last node's connection may still have
	// been opening, and it is then opened for the next operation.
	if got := lease.(locks.NodeReporter).GrantedBy(); len(got) < l.Quorum() {
		t.Fatalf("granted by %v, fewer than a quorum", got)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	for i, d := range dialers {
		if d.dials.Load() == 0 {
			t.Fatalf("n%d was never dialed", i+1)
		}
	}
	// Once every connection is open, every node answers.
	deadline := time.Now().Add(time.Minute)
	for i, c := range conns {
		for c.Client.PoolStats().IdleConns == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("n%d has no idle connection after a minute", i+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	lease, err = l.TryAcquire(ctx, "k", ttl)
	if err != nil {
		t.Fatalf("acquire on open connections: %v", err)
	}
	if got := lease.(locks.NodeReporter).GrantedBy(); len(got) != 3 {
		t.Errorf("granted by %v, want every node", got)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}
