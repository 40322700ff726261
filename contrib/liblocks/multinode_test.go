package liblocks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
	"github.com/lockjepsen/lockjepsen/testkit/testutil"
)

// nodeSet is n independent redis-server nodes named n1..nN.
type nodeSet struct {
	servers []*local.Server
	conns   []locks.Conn
}

func startCluster(t *testing.T, n int) *nodeSet {
	t.Helper()
	c := &nodeSet{}
	for i := 0; i < n; i++ {
		s, rdb := redistest.Start(t)
		c.servers = append(c.servers, s)
		c.conns = append(c.conns, locks.Conn{Name: fmt.Sprintf("n%d", i+1), Client: rdb})
	}
	return c
}

// pause stops the given nodes until the returned function (also run at
// cleanup) continues them.
func (c *nodeSet) pause(t *testing.T, idx ...int) func() {
	t.Helper()
	for _, i := range idx {
		if err := c.servers[i].Pause(); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	resume := func() {
		once.Do(func() {
			for _, i := range idx {
				c.servers[i].Resume()
			}
		})
	}
	t.Cleanup(resume)
	return resume
}

// values returns each node's value of key ("" when absent), in node order.
func (c *nodeSet) values(t *testing.T, key string, idx ...int) []string {
	t.Helper()
	if idx == nil {
		for i := range c.conns {
			idx = append(idx, i)
		}
	}
	var out []string
	for _, i := range idx {
		v, err := c.conns[i].Client.Get(context.Background(), key).Result()
		if err != nil && err != redis.Nil {
			t.Fatalf("GET %s on %s: %v", key, c.conns[i].Name, err)
		}
		out = append(out, v)
	}
	return out
}

func count(vals []string, v string) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

// testNodes is how many nodes a lock gets in these tests.
func testNodes(t *testing.T, name string) int {
	nc, err := locks.NodesFor(name)
	if err != nil {
		t.Fatal(err)
	}
	if nc.Max == 1 {
		return 1
	}
	return 5
}

// testNodeTimeout bounds a node's answer in these tests: long enough that
// a machine whose two cores are taken (the race detector, a parallel
// build, other tests' servers) answers in time, since a test that is not
// about timeouts must not see one; short enough that a paused node costs
// a row of TestQuorum half a second.
const testNodeTimeout = 500 * time.Millisecond

func build(t *testing.T, name string, conns []locks.Conn, prefix string) locks.Locker {
	t.Helper()
	l, err := locks.New(name, conns, locks.Options{TokenPrefix: prefix, NodeTimeout: testNodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestEveryLock runs the behaviours every lock shares on one single node
// and one five-node cluster, each lock on its own keys.
func TestEveryLock(t *testing.T) {
	t.Parallel()
	single, five := startCluster(t, 1), startCluster(t, 5)
	ctx := context.Background()
	for _, d := range locks.All() {
		name := d.Name
		if name == locks.WaitName {
			continue // needs replicas: wait_test.go and the Sentinel tests in harness
		}
		if d.DialsAddr {
			continue // dials etcd members, not Redis nodes: etcd_test.go
		}
		if slices.Contains(contextLocks, name) {
			continue // keys of their own, renewed by the library: ctxlock_test.go
		}
		c := single
		if testNodes(t, name) == 5 {
			c = five
		}
		// held is how many nodes must have a holder's token for it to hold.
		held := len(c.conns)/2 + 1
		hasTTL := name != locks.SetnxNoTTL

		t.Run(name+"/exclusive", func(t *testing.T) {
			t.Parallel()
			key := "excl-" + name
			a, b := build(t, name, c.conns, "a"), build(t, name, c.conns, "b")
			la, err := a.TryAcquire(ctx, key, 2*time.Second)
			if err != nil {
				t.Fatalf("first acquire: %v", err)
			}
			if got := count(c.values(t, key), la.Token()); got < held {
				t.Fatalf("token %s on %d nodes, want ≥ %d", la.Token(), got, held)
			}
			_, err = b.TryAcquire(ctx, key, 2*time.Second)
			if !errors.Is(err, locks.ErrNotAcquired) || !locks.Definite(err) {
				t.Fatalf("second acquire while held: got %v, want a definite ErrNotAcquired", err)
			}
			if err := la.Release(ctx); err != nil {
				t.Fatalf("release: %v", err)
			}
			lb, err := b.TryAcquire(ctx, key, 2*time.Second)
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			if err := lb.Release(ctx); err != nil {
				t.Fatalf("second release: %v", err)
			}
		})

		t.Run(name+"/stale-release", func(t *testing.T) {
			if !hasTTL {
				t.Skip("nothing expires")
			}
			t.Parallel()
			key := "stale-" + name
			stale, err := build(t, name, c.conns, "a").TryAcquire(ctx, key, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			b := build(t, name, c.conns, "b")
			var current locks.Lease
			for deadline := time.Now().Add(3 * time.Second); current == nil; {
				current, err = b.TryAcquire(ctx, key, 5*time.Second)
				if err != nil && !errors.Is(err, locks.ErrNotAcquired) {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("the first lease never expired")
				}
				time.Sleep(5 * time.Millisecond)
			}
			relErr := stale.Release(ctx)
			extErr := stale.Extend(ctx, time.Second)
			onNodes := count(c.values(t, key), current.Token())
			if name == locks.SetnxDel {
				// The bug this lock stands for.
				if relErr != nil || onNodes != 0 {
					t.Fatalf("setnx-del stale release: err %v, current holder's key on %d nodes; want it deleted", relErr, onNodes)
				}
				return
			}
			if !errors.Is(relErr, locks.ErrNotHeld) || !locks.Definite(relErr) {
				t.Fatalf("stale release: got %v, want ErrNotHeld", relErr)
			}
			if !errors.Is(extErr, locks.ErrNotHeld) {
				t.Fatalf("stale extend: got %v, want ErrNotHeld", extErr)
			}
			if onNodes < held {
				t.Fatalf("after the stale release the current holder's token is on %d nodes, want ≥ %d", onNodes, held)
			}
		})

		t.Run(name+"/extend", func(t *testing.T) {
			t.Parallel()
			key := "ext-" + name
			l, err := build(t, name, c.conns, "a").TryAcquire(ctx, key, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			before := l.ValidUntil()
			if err := l.Extend(ctx, 5*time.Second); err != nil {
				t.Fatalf("extend: %v", err)
			}
			if !hasTTL {
				if !l.ValidUntil().IsZero() {
					t.Fatal("a lock without TTL must report no validity limit")
				}
				return
			}
			if !l.ValidUntil().After(before.Add(4 * time.Second)) {
				t.Fatalf("extend moved ValidUntil by %v, want > 4s", l.ValidUntil().Sub(before))
			}
			long := 0
			for _, cn := range c.conns {
				if cn.Client.PTTL(ctx, key).Val() > 4*time.Second {
					long++
				}
			}
			if long < held {
				t.Fatalf("PTTL > 4s on %d nodes, want ≥ %d", long, held)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})

		t.Run(name+"/lost-extend", func(t *testing.T) {
			if !hasTTL {
				t.Skip("a lock without TTL never loses its key by expiry")
			}
			t.Parallel()
			key := "lost-ext-" + name
			a, b := build(t, name, c.conns, "a"), build(t, name, c.conns, "b")
			la, err := a.TryAcquire(ctx, key, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			// The lease expires on every node; then another client owns
			// the key, with a TTL of its own. Waiting for the grant alone
			// is not enough: on a loaded machine the first client's SET can
			// reach one node late and outlive the others there, and
			// extending that node's own key is no resurrection.
			testutil.WaitFor(t, "the first lease's key to expire on every node", 30*time.Second, func() string {
				if n := count(c.values(t, key), la.Token()); n > 0 {
					return fmt.Sprintf("still on %d nodes", n)
				}
				return ""
			})
			var lb locks.Lease
			testutil.WaitFor(t, "a second client to get the lock", 30*time.Second, func() string {
				if lb, err = b.TryAcquire(ctx, key, 10*time.Second); err != nil {
					return err.Error()
				}
				return ""
			})
			err = la.Extend(ctx, 30*time.Second)
			if !errors.Is(err, locks.ErrNotHeld) {
				t.Fatalf("extend of a lost lease: got %v, want ErrNotHeld", err)
			}
			if got := count(c.values(t, key), lb.Token()); got < held {
				t.Fatalf("after the lost extend the new holder's token is on %d nodes, want ≥ %d", got, held)
			}
			for _, cn := range c.conns {
				if ttl := cn.Client.PTTL(ctx, key).Val(); ttl > 10*time.Second {
					t.Fatalf("the lost extend resurrected or lengthened the key on %s: PTTL %v", cn.Name, ttl)
				}
			}
			lb.Release(ctx)
		})

		t.Run(name+"/unique-tokens", func(t *testing.T) {
			t.Parallel()
			key := "tok-" + name
			seen := map[string]bool{}
			lockers := []locks.Locker{build(t, name, c.conns, "a"), build(t, name, c.conns, "b")}
			for i := 0; i < 20; i++ {
				l, err := lockers[i%2].TryAcquire(ctx, key, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if seen[l.Token()] {
					t.Fatalf("token %q granted twice", l.Token())
				}
				seen[l.Token()] = true
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})

		// Exclusion under contention. A node that answers after its 50 ms
		// timeout (a loaded machine) makes an outcome unknown, which is
		// an honest answer, not a failure: it is counted, and at worst
		// the key stays until its TTL and later attempts are refused.
		t.Run(name+"/contention", func(t *testing.T) {
			t.Parallel()
			key := "cont-" + name
			var inside, grants, unknown atomic.Int32
			var wg sync.WaitGroup
			for p := 0; p < 4; p++ {
				l := build(t, name, c.conns, fmt.Sprintf("p%d", p))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 25; i++ {
						lease, err := l.TryAcquire(ctx, key, 2*time.Second)
						if err != nil {
							if !locks.Definite(err) {
								unknown.Add(1)
							}
							continue
						}
						grants.Add(1)
						if !inside.CompareAndSwap(0, 1) {
							t.Errorf("two holders at once (%s)", lease.Token())
						}
						time.Sleep(200 * time.Microsecond)
						inside.Store(0)
						if err := lease.Release(ctx); err != nil {
							if locks.Definite(err) {
								t.Errorf("release of a held lock: %v", err)
							}
							unknown.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if grants.Load() == 0 {
				t.Fatalf("nobody ever got the lock (%d unknown outcomes)", unknown.Load())
			}
			t.Logf("%d grants, %d unknown outcomes", grants.Load(), unknown.Load())
		})
	}
}

func TestNewChecksNodeCount(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	conns := func(n int) []locks.Conn {
		out := make([]locks.Conn, n)
		for i := range out {
			out[i] = locks.Conn{Name: fmt.Sprintf("n%d", i+1), Client: rdb}
		}
		return out
	}
	cases := []struct {
		lock    string
		nodes   int
		wantErr string // "" = accepted
	}{
		{locks.Token, 1, ""},
		{locks.Fenced, 1, ""},
		{locks.SetnxDel, 1, ""},
		{locks.SetnxNoTTL, 1, ""},
		{liblocks.RedislockName, 1, ""},
		{locks.RedlockName, 3, ""},
		{locks.RedlockName, 5, ""},
		{liblocks.RedsyncName, 7, ""},
		{locks.Token, 5, `lock "token" is a single-instance lock and needs exactly 1 node, but the system has 5`},
		{liblocks.RedislockName, 3, "needs exactly 1 node, but the system has 3"},
		{locks.Fenced, 0, "needs exactly 1 node, but the system has 0"},
		{locks.RedlockName, 1, `lock "redlock" needs an odd number of nodes ≥ 3 (a majority quorum), but the system has 1`},
		{locks.RedlockName, 4, "needs an odd number of nodes ≥ 3 (a majority quorum), but the system has 4"},
		{liblocks.RedsyncName, 2, "needs an odd number of nodes ≥ 3"},
		{"zookeeper", 1, `unknown lock "zookeeper"; want one of token, setnx-del`},
	}
	for _, tc := range cases {
		l, err := locks.New(tc.lock, conns(tc.nodes), locks.Options{TokenPrefix: "p1"})
		if tc.wantErr == "" {
			if err != nil || l == nil {
				t.Errorf("New(%s, %d nodes): %v", tc.lock, tc.nodes, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("New(%s, %d nodes): got %v, want an error containing %q", tc.lock, tc.nodes, err, tc.wantErr)
		}
		if l != nil {
			t.Errorf("New(%s, %d nodes) returned a lock with its error", tc.lock, tc.nodes)
		}
	}
	for _, name := range locks.Names() {
		if _, err := locks.NodesFor(name); err != nil {
			t.Errorf("NodesFor(%s): %v", name, err)
		}
	}
	if _, err := locks.New(locks.RedlockName, conns(3), locks.Options{DriftFactor: 1.5}); err == nil {
		t.Error("a drift factor ≥ 1 must be refused")
	}
	if _, err := locks.New(liblocks.RedislockName, conns(1), locks.Options{TokenPrefix: "run.1"}); err == nil {
		t.Error("redislock must refuse a token prefix with '.'")
	}
	// The harness still builds single-instance locks this way.
	for _, name := range locks.Variants {
		if _, err := locks.NewRedisLock(rdb, name, "p1"); err != nil {
			t.Errorf("NewRedisLock(%s): %v", name, err)
		}
	}
}
