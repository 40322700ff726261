package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestSingleWithResourceStartsAndStops(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	cl, err := local.Backend{}.Start(context.Background(), cluster.Spec{
		System: cluster.Single, Nodes: 1, Dir: dir, Persistence: cluster.PersistNone, Resource: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes := append(cl.Nodes(), *cl.Resource())
	if len(nodes) != 2 {
		t.Fatalf("got %d nodes", len(nodes))
	}
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DisableIdentity: true})
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		c.Close()
		if !strings.HasPrefix(n.LogPath, dir) {
			t.Fatalf("log %s is outside the run directory", n.LogPath)
		}
		if n.PID == 0 || !alive(n.PID) {
			t.Fatalf("%s: no live PID", n.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nodes.json")); err != nil {
		t.Fatalf("PIDs not recorded: %v", err)
	}
	cl.Close(context.Background())
	cl.Close(context.Background()) // idempotent
	for _, n := range nodes {
		if alive(n.PID) {
			t.Fatalf("%s (pid %d) still running after Close", n.Name, n.PID)
		}
	}
}

func TestMissingBinaryIsAClearError(t *testing.T) {
	t.Setenv("LOCKJEPSEN_REDIS_SERVER", "/nonexistent/redis-server")
	_, err := local.Backend{}.Start(context.Background(), cluster.Spec{
		System: cluster.Single, Nodes: 1, Dir: t.TempDir(), Persistence: cluster.PersistNone,
	})
	if !errors.Is(err, local.ErrMissingBinary) {
		t.Fatalf("got %v, want ErrMissingBinary", err)
	}
	t.Setenv("LOCKJEPSEN_REDIS_SERVER", "")
	t.Setenv("PATH", t.TempDir())
	_, err = local.FindRedisServer()
	if err == nil || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Fatalf("the error must say how to install redis-server, got %v", err)
	}
}

func TestNodeThatCannotStartReportsItsLog(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	bin, _ := local.FindRedisServer()
	s := local.NewServer(bin, "bad", "node", local.Host, 0, filepath.Join(dir, "d"), filepath.Join(dir, "redis.log"),
		[]string{"--no-such-option", "1"})
	err := s.Start(context.Background())
	if err == nil {
		s.Stop()
		t.Fatal("a node with a bad option started")
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("the error should show the server's complaint, got: %v", err)
	}
	if s.Running() {
		t.Fatal("process left running")
	}
}

func TestPauseMakesRequestsTimeOut(t *testing.T) {
	s, c := redistest.Start(t)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*1e6)
	err := c.Ping(ctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a paused node answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

func startSingle(t *testing.T, persistence string, fakeClock bool) (*local.Cluster, *redis.Client) {
	t.Helper()
	redistest.RequireBinary(t)
	cl, err := local.Backend{}.Start(context.Background(), cluster.Spec{
		System: cluster.Single, Nodes: 1, Dir: t.TempDir(), Persistence: persistence, FakeClock: fakeClock,
	})
	if err != nil {
		if fakeClock && os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") == "" {
			t.Skipf("no fake clock here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(context.Background()) })
	c := redis.NewClient(&redis.Options{Addr: cl.Nodes()[0].Addr, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return cl.(*local.Cluster), c
}

// What a kill loses depends on persistence; the restarted node always
// answers on the same address.
func TestKillAndRestart(t *testing.T) {
	cases := []struct {
		persistence string
		lose        bool
		wantKey     bool
	}{
		{cluster.PersistNone, false, false},
		{cluster.PersistAlways, false, true},
		{cluster.PersistEverysec, false, true}, // the page cache survives a SIGKILL
		{cluster.PersistEverysec, true, false}, // unless the unsynced tail is dropped
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s lose=%v", tc.persistence, tc.lose), func(t *testing.T) {
			cl, c := startSingle(t, tc.persistence, false)
			ctx := context.Background()
			if tc.lose {
				// Let more than the lost second pass, so that the write
				// below is the only thing in the dropped tail.
				time.Sleep(1500 * time.Millisecond)
			}
			if err := c.Set(ctx, "lock", "token", 10*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			before := cl.Nodes()[0]
			if err := cl.Kill("n1", tc.lose); err != nil {
				t.Fatal(err)
			}
			if alive(before.PID) {
				t.Fatal("killed node still running")
			}
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("a killed node answered")
			}
			if err := cl.Restart(ctx, "n1"); err != nil {
				t.Fatal(err)
			}
			after := cl.Nodes()[0]
			if after.Addr != before.Addr || after.PID == before.PID {
				t.Fatalf("restart: addr %s -> %s, pid %d -> %d", before.Addr, after.Addr, before.PID, after.PID)
			}
			got := c.Exists(ctx, "lock").Val() == 1
			if got != tc.wantKey {
				t.Fatalf("key survived the kill: %v, want %v", got, tc.wantKey)
			}
		})
	}
}

func TestFakeClockExpiresKeysEarly(t *testing.T) {
	cl, c := startSingle(t, cluster.PersistNone, true)
	ctx := context.Background()
	c.Set(ctx, "lock", "token", 2*time.Second)
	if err := cl.SetClock("n1", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if !waitFor(time.Second, func() bool { return c.Exists(ctx, "lock").Val() == 0 }) {
		t.Fatal("a 2s key outlived a 3s forward jump")
	}
	if err := cl.SetClock("n1", 0); err != nil {
		t.Fatal(err)
	}
	pid := cl.Nodes()[0].PID
	if err := cl.Kill("n1", false); err != nil {
		t.Fatal(err)
	}
	// libfaketime's shared memory of a SIGKILLed node is cleaned up.
	if m, _ := filepath.Glob(fmt.Sprintf("/dev/shm/*faketime*_%d", pid)); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
	if err := cl.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("restarted fake-clock node: %v", err)
	}
}

// waitFor polls cond until it holds (true) or d passes (false).
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
