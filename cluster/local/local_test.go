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
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestSingleWithResourceStartsAndStops(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	cl, err := local.Backend{}.Start(context.Background(), cluster.Spec{
		System: cluster.Single, Nodes: 1, Dir: dir, Persistence: cluster.PersistNone, Resource: true,
		Processes: recordIn(dir),
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

// A port taken by another redis-server between the pick and the start must
// fail the start, not hand the caller someone else's server: the other one
// answers PING just as well (a CI run's sentinel drew a node's port and was
// taken for started).
func TestPortTakenByAnotherServerFailsTheStart(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	bin, _ := local.FindRedisServer()
	first := local.NewServer(bin, "first", "node", local.Host, 0, filepath.Join(dir, "a"), filepath.Join(dir, "a.log"), nil)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	second := local.NewServer(bin, "second", "node", local.Host, first.Port, filepath.Join(dir, "b"), filepath.Join(dir, "b.log"), nil)
	err := second.Start(context.Background())
	if err == nil {
		second.Stop()
		t.Fatalf("second started on %s, which the first server holds", first.Addr())
	}
	if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("the error should say the address is in use, got: %v", err)
	}
	if second.Running() {
		t.Fatal("process left running")
	}
	if !first.Running() {
		t.Fatal("the first server died")
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
	eventually(t, waitDeadline, "an answer to PING after resume", func() error { return c.Ping(context.Background()).Err() })
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
	return cl.(*local.Cluster), client(t, cl.Nodes()[0].Addr)
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
			// With lose, the kill drops what the node wrote in the second
			// before it. The write below must be all of that tail: the
			// node must have been sampled more than a second before the
			// kill and before the write, and the kill must come less
			// than a second after the write. A loaded machine can stall
			// the test past that second; such a round proves nothing
			// either way and is played again.
			const rounds = 5
			for round := 1; ; round++ {
				if tc.lose {
					eventually(t, waitDeadline, "a sample of n1's append-only file more than a second old", func() error {
						if at := local.AOFSampleTimes(cl, "n1"); len(at) > 0 && time.Since(at[0]) > time.Second {
							return nil
						}
						return errors.New("none yet")
					})
				}
				// A key of its own each round: a round played again may
				// have kept its key, or lost more than it.
				key := fmt.Sprintf("lock%d", round)
				written := time.Now()
				eventually(t, waitDeadline, "a write on n1", func() error { return c.Set(ctx, key, "token", time.Hour).Err() })
				before := cl.Nodes()[0]
				killAt := time.Now()
				if err := cl.Kill("n1", tc.lose); err != nil {
					t.Fatal(err)
				}
				killed := time.Now()
				// Asked before the restart: the sampler prunes what is
				// older than 3 s once it samples the node again.
				conclusive := !tc.lose || killed.Sub(written) < time.Second && sampledBy(local.AOFSampleTimes(cl, "n1"), killAt.Add(-time.Second))
				if alive(before.PID) {
					t.Fatal("killed node still running")
				}
				if err := c.Ping(ctx).Err(); err == nil {
					t.Fatal("a killed node answered")
				}
				if err := cl.Restart(within(t, waitDeadline), "n1"); err != nil {
					t.Fatal(err)
				}
				after := cl.Nodes()[0]
				if after.Addr != before.Addr || after.PID == before.PID {
					t.Fatalf("restart: addr %s -> %s, pid %d -> %d", before.Addr, after.Addr, before.PID, after.PID)
				}
				if !conclusive {
					if round == rounds {
						t.Fatalf("%d rounds in which the machine stalled the kill more than a second after the write (last: %v)", rounds, killed.Sub(written))
					}
					t.Logf("round %d: the kill came %v after the write, which is then not all of the unsynced tail; again", round, killed.Sub(written).Round(time.Millisecond))
					continue
				}
				var n int64
				eventually(t, waitDeadline, "the restarted node answering EXISTS", func() (err error) {
					n, err = c.Exists(ctx, key).Result()
					return err
				})
				if got := n == 1; got != tc.wantKey {
					t.Fatalf("key survived the kill: %v, want %v", got, tc.wantKey)
				}
				return
			}
		})
	}
}

// sampledBy reports whether a sample was taken at or before t.
func sampledBy(samples []time.Time, t time.Time) bool {
	return len(samples) > 0 && !samples[0].After(t)
}

// A forward jump of the node's clock expires a key early. The key's TTL
// is far longer than the wait, so only the jump can expire it in time.
func TestFakeClockExpiresKeysEarly(t *testing.T) {
	cl, c := startSingle(t, cluster.PersistNone, true)
	ctx := context.Background()
	const ttl = 10 * time.Minute
	set := time.Now()
	eventually(t, waitDeadline, "a write on n1", func() error { return c.Set(ctx, "lock", "token", ttl).Err() })
	if err := cl.SetClock("n1", 2*ttl); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitDeadline, "the key expired by the jump", func() error {
		n, err := c.Exists(ctx, "lock").Result()
		if err == nil && n != 0 {
			err = fmt.Errorf("a %v key outlived a %v forward jump", ttl, 2*ttl)
		}
		return err
	})
	if real := time.Since(set); real >= ttl {
		t.Fatalf("the key expired only after %v, its own TTL", real)
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
	if err := cl.Restart(within(t, waitDeadline), "n1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitDeadline, "the restarted fake-clock node answering PING", func() error { return c.Ping(ctx).Err() })
}

// recordIn records a cluster's processes in dir/nodes.json, as the harness
// does, for the tests that check what a backend reports.
func recordIn(dir string) func([]cluster.Node) error {
	return func(nodes []cluster.Node) error { return runfile.WriteNodes(dir, nodes) }
}
