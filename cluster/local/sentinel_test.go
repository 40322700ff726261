package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/local/fakeclock"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
)

// requireSentinel skips (or, with LOCKJEPSEN_REQUIRE_REDIS, fails) a test
// without redis-server and redis-sentinel.
func requireSentinel(t *testing.T) {
	t.Helper()
	redistest.RequireBinary(t)
	if _, err := local.FindRedisSentinel(); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-sentinel is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// meshOf lets the backend add its links to a proxy mesh.
func meshOf(m *proxy.Mesh) cluster.Mesh {
	return cluster.MeshFunc(func(from, to, upstream string) (string, error) {
		l, err := m.Add(from, to, upstream, "")
		if err != nil {
			return "", err
		}
		return l.Addr(), nil
	})
}

// startSentinel starts the default sentinel system (3 nodes, 3 sentinels,
// fast timings), through a fresh mesh if withMesh.
func startSentinel(t *testing.T, withMesh bool, tweak func(*cluster.Spec)) (*local.Cluster, *proxy.Mesh) {
	t.Helper()
	requireSentinel(t)
	spec := cluster.Spec{System: cluster.Sentinel, Nodes: 3, Dir: t.TempDir(), Persistence: cluster.PersistNone}
	var mesh *proxy.Mesh
	if withMesh {
		mesh = proxy.NewMesh()
		t.Cleanup(func() { mesh.Close() })
		spec.Mesh = meshOf(mesh)
	}
	if tweak != nil {
		tweak(&spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	cl, err := local.Backend{}.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sentinel system healthy after %v", time.Since(start).Round(time.Millisecond))
	// Registered after the mesh's, so it runs first: the processes stop
	// before their links.
	t.Cleanup(func() { cl.Close(context.Background()) })
	return cl.(*local.Cluster), mesh
}

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DisableIdentity: true,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func nodeByName(t *testing.T, cl *local.Cluster, name string) cluster.Node {
	t.Helper()
	for _, n := range append(cl.Nodes(), cl.Sentinels()...) {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return cluster.Node{}
}

// role is what ROLE says: "master" or "slave".
func role(ctx context.Context, c *redis.Client) string {
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(v) == 0 {
		return fmt.Sprintf("error: %v", err)
	}
	s, _ := v[0].(string)
	return s
}

// eventually polls cond until it returns nil or d passes, and returns the
// time it took.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSentinelStartsHealthy(t *testing.T) {
	for _, withMesh := range []bool{false, true} {
		t.Run(fmt.Sprintf("mesh=%v", withMesh), func(t *testing.T) {
			t.Parallel()
			cl, mesh := startSentinel(t, withMesh, nil)
			ctx := context.Background()
			if p, err := cl.Primary(ctx); err != nil || p != "n1" {
				t.Fatalf("primary %q, %v; want n1", p, err)
			}
			if cl.MasterName() != cluster.MasterName {
				t.Fatalf("master name %q", cl.MasterName())
			}
			nodes := cl.Nodes()
			wantRoles := []string{cluster.RolePrimary, cluster.RoleReplica, cluster.RoleReplica}
			for i, n := range nodes {
				if n.Role != wantRoles[i] || n.Name != fmt.Sprintf("n%d", i+1) {
					t.Fatalf("node %d: %s %s", i, n.Name, n.Role)
				}
			}
			sentinels := cl.Sentinels()
			if len(sentinels) != cluster.DefaultSentinels {
				t.Fatalf("%d sentinels", len(sentinels))
			}
			for _, n := range append(append([]cluster.Node{}, nodes...), sentinels...) {
				switch {
				case withMesh && (n.Announce == n.Addr || mesh.Find("net", n.Name) == nil ||
					mesh.Find("net", n.Name).Addr() != n.Announce):
					t.Fatalf("%s: announce %s is not its inbound link", n.Name, n.Announce)
				case !withMesh && n.Announce != n.Addr:
					t.Fatalf("%s: announce %s without a mesh", n.Name, n.Announce)
				}
			}
			if err := client(t, nodes[0].Addr).Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			for _, r := range nodes[1:] {
				c := client(t, r.Addr)
				eventually(t, 2*time.Second, "replicated write on "+r.Name, func() error {
					v, err := c.Get(ctx, "k").Result()
					if err == nil && v != "v" {
						err = fmt.Errorf("got %q", v)
					}
					return err
				})
			}
			if err := cl.WaitHealthy(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// announceOf is the name of the node whose announced address is addr.
func announceOf(cl *local.Cluster, addr string) string {
	for _, n := range cl.Nodes() {
		if n.Announce == addr {
			return n.Name
		}
	}
	return addr
}

// replicaOf checks that a node is a replica whose primary is want.
func replicaOf(ctx context.Context, cl *local.Cluster, c *redis.Client, want string) error {
	v, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return err
	}
	if len(v) < 3 || v[0] != "slave" {
		return fmt.Errorf("role %v", v)
	}
	addr := fmt.Sprintf("%v:%v", v[1], v[2])
	if got := announceOf(cl, addr); got != want {
		return fmt.Errorf("replica of %s, want %s", got, want)
	}
	return nil
}

func TestSentinelManualFailover(t *testing.T) {
	t.Parallel()
	cl, _ := startSentinel(t, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	p, err := cl.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manual failover n1 -> %s in %v", p, time.Since(start).Round(time.Millisecond))
	if p == "n1" {
		t.Fatal("failover kept n1")
	}
	if got, err := cl.Primary(ctx); err != nil || got != p {
		t.Fatalf("Primary() = %q, %v after failover to %s", got, err, p)
	}
	start = time.Now()
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("healthy %v after the failover (the old primary is demoted)", time.Since(start).Round(time.Millisecond))
	if got, err := cl.Primary(ctx); err != nil || got != p {
		t.Fatalf("Primary() = %q, %v after WaitHealthy", got, err)
	}
	// Every node's configuration names the new primary by its link, so a
	// restart keeps the topology.
	primary := nodeByName(t, cl, p)
	for _, n := range cl.Nodes() {
		if n.Name == p {
			continue
		}
		if err := replicaOf(ctx, cl, client(t, n.Addr), p); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		conf, err := os.ReadFile(filepath.Join(filepath.Dir(n.LogPath), "redis.conf"))
		if err != nil {
			t.Fatal(err)
		}
		want := "replicaof " + strings.Replace(primary.Announce, ":", " ", 1)
		if !strings.Contains(string(conf), want) {
			t.Fatalf("%s's redis.conf lacks %q:\n%s", n.Name, want, conf)
		}
	}
}

func TestSentinelKillPrimary(t *testing.T) {
	t.Parallel()
	cl, _ := startSentinel(t, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if err := cl.Kill("n1", false); err != nil {
		t.Fatal(err)
	}
	var p string
	took := eventually(t, 10*time.Second, "a new primary", func() error {
		got, err := cl.Primary(ctx)
		if err != nil {
			return err
		}
		if got == "n1" {
			return errors.New("still n1")
		}
		if r := role(ctx, client(t, nodeByName(t, cl, got).Addr)); r != "master" {
			return fmt.Errorf("%s is named but says %s", got, r)
		}
		p = got
		return nil
	})
	// REFERENCES.md: 2.2–3.2 s with down-after 1 s (1 s to subjective
	// down, agreement, election, promotion).
	t.Logf("kill n1: %s promoted and serving after %v", p, took.Round(time.Millisecond))
	if took < cluster.DefaultDownAfter {
		t.Fatalf("failover after %v, before down-after", took)
	}
	if err := cl.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	n1 := client(t, nodeByName(t, cl, "n1").Addr)
	took = eventually(t, 20*time.Second, "n1 rejoining as a replica", func() error {
		return replicaOf(ctx, cl, n1, p)
	})
	t.Logf("restarted n1 is a replica of %s after %v", p, took.Round(time.Millisecond))
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// Jepsen's Redis split brain: the primary is cut off from its replicas and
// the sentinels, which promote another node, while a client still reaches
// the old primary and writes to it; on healing, the old primary is demoted
// and its writes are gone.
func TestSentinelIsolatedPrimarySplitBrain(t *testing.T) {
	t.Parallel()
	cl, mesh := startSentinel(t, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	n1 := nodeByName(t, cl, "n1")
	c0link, err := mesh.Add("c0", "n1", n1.Addr, "")
	if err != nil {
		t.Fatal(err)
	}
	old := client(t, c0link.Addr())
	if err := old.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	in := mesh.Find("net", "n1")
	if err := in.Apply(proxy.Fault{Mode: proxy.Partition}); err != nil {
		t.Fatal(err)
	}
	var p string
	took := eventually(t, 10*time.Second, "a new primary", func() error {
		got, err := cl.Primary(ctx)
		if err != nil {
			return err
		}
		if got == "n1" {
			return errors.New("still n1")
		}
		p = got
		return nil
	})
	t.Logf("n1 isolated: the sentinels name %s after %v", p, took.Round(time.Millisecond))
	newc := client(t, nodeByName(t, cl, p).Addr)
	eventually(t, 5*time.Second, p+" accepting writes", func() error { return newc.Set(ctx, "new", "1", 0).Err() })
	// The old primary still takes writes from the client that reaches it.
	if err := old.Set(ctx, "split", "lost", 0).Err(); err != nil {
		t.Fatalf("the isolated primary refused a client write: %v", err)
	}
	if r := role(ctx, old); r != "master" {
		t.Fatalf("isolated n1 says %s", r)
	}
	if err := in.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	took = eventually(t, 25*time.Second, "n1 demoted after healing", func() error {
		return replicaOf(ctx, cl, old, p)
	})
	t.Logf("healed: n1 demoted to a replica of %s after %v", p, took.Round(time.Millisecond))
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := old.Exists(ctx, "split").Result(); err != nil || n != 0 {
		t.Fatalf("the write acknowledged by the isolated primary: exists=%d, %v; want lost", n, err)
	}
	if n, err := old.Exists(ctx, "new").Result(); err != nil || n != 1 {
		t.Fatalf("n1 lacks the new primary's write: exists=%d, %v", n, err)
	}
}

// The controller acts on sentinels too, and Close leaves nothing behind.
func TestSentinelControlAndClose(t *testing.T) {
	t.Parallel()
	requireSentinel(t)
	fake := true
	if _, err := fakeclock.Prepare(context.Background(), filepath.Join(t.TempDir(), "cache")); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatal(err)
		}
		t.Logf("no fake clock here, shm clean-up not checked: %v", err)
		fake = false
	}
	cl, _ := startSentinel(t, true, func(s *cluster.Spec) {
		s.FakeClock = fake
		s.Persistence = cluster.PersistEverysec
		s.MinReplicasToWrite = 1
		s.MinReplicasMaxLag = 2 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n1 := client(t, nodeByName(t, cl, "n1").Addr)
	if v, err := n1.ConfigGet(ctx, "min-replicas-to-write").Result(); err != nil || v["min-replicas-to-write"] != "1" {
		t.Fatalf("min-replicas-to-write: %v, %v", v, err)
	}
	s1 := nodeByName(t, cl, "s1")
	if err := cl.Kill("s1", true); err == nil {
		t.Fatal("losing a sentinel's unsynced writes should be refused")
	}
	if err := cl.Kill("s1", false); err != nil {
		t.Fatal(err)
	}
	if alive(s1.PID) {
		t.Fatal("killed sentinel still running")
	}
	if err := cl.Restart(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Pause("s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Primary(ctx); err != nil {
		t.Fatalf("a majority of sentinels should still answer: %v", err)
	}
	if err := cl.Resume("s2"); err != nil {
		t.Fatal(err)
	}
	if fake {
		if err := cl.SetClock("s3", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(s1.LogPath)), "..", "nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded []cluster.Node
	if err := json.Unmarshal(b, &recorded); err != nil {
		t.Fatal(err)
	}
	if len(recorded) != 6 {
		t.Fatalf("nodes.json has %d processes, want 3 nodes and 3 sentinels", len(recorded))
	}
	for _, n := range recorded {
		if n.Name == "s1" && n.PID == s1.PID {
			t.Fatal("nodes.json still has the killed sentinel's PID")
		}
	}
	if fake {
		// The sentinels run under libfaketime too (their clock is a
		// fault target: a jump puts a sentinel in TILT).
		for _, n := range cl.Sentinels() {
			if len(shmLeft(n.PID)) == 0 {
				t.Fatalf("sentinel %s runs without libfaketime", n.Name)
			}
		}
	}
	cl.Close(context.Background())
	for _, n := range recorded {
		if alive(n.PID) {
			t.Fatalf("%s (pid %d) still running after Close", n.Name, n.PID)
		}
		if left := shmLeft(n.PID); len(left) != 0 {
			t.Fatalf("%s left %v", n.Name, left)
		}
	}
	if left := shmLeft(s1.PID); len(left) != 0 {
		t.Fatalf("the killed sentinel left %v", left)
	}
}

// shmLeft are libfaketime's files of pid that exist.
func shmLeft(pid int) []string {
	var out []string
	for _, f := range fakeclock.ShmFiles(pid) {
		if _, err := os.Stat(f); err == nil {
			out = append(out, f)
		}
	}
	return out
}

func TestSentinelSpecValidation(t *testing.T) {
	base := cluster.Spec{System: cluster.Sentinel, Nodes: 3, Dir: ".", Persistence: cluster.PersistNone}
	if err := base.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := map[string]func(*cluster.Spec){
		"one node":           func(s *cluster.Spec) { s.Nodes = 1 },
		"even sentinels":     func(s *cluster.Spec) { s.Sentinels = 2 },
		"negative sentinels": func(s *cluster.Spec) { s.Sentinels = -1 },
		"sub-ms down-after":  func(s *cluster.Spec) { s.DownAfter = 1500 * time.Microsecond },
		"min-replicas > n-1": func(s *cluster.Spec) { s.MinReplicasToWrite = 3 },
		"fractional lag":     func(s *cluster.Spec) { s.MinReplicasMaxLag = 1500 * time.Millisecond },
		"sentinels on redlock": func(s *cluster.Spec) {
			s.System, s.Nodes, s.Sentinels = cluster.Redlock, 5, 3
		},
	}
	for name, tweak := range bad {
		s := base
		tweak(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	d := base.WithDefaults()
	if d.Sentinels != 3 || d.DownAfter != time.Second || d.FailoverTimeout != 3*time.Second {
		t.Fatalf("defaults: %+v", d)
	}
	if _, err := (local.Backend{}).Start(context.Background(), cluster.Spec{
		System: cluster.Sentinel, Nodes: 1, Dir: t.TempDir(), Persistence: cluster.PersistNone,
	}); err == nil {
		t.Fatal("started a sentinel system of one node")
	}
}

func TestMissingSentinelIsAClearError(t *testing.T) {
	t.Setenv("LOCKJEPSEN_REDIS_SENTINEL", "")
	t.Setenv("PATH", t.TempDir())
	_, err := local.FindRedisSentinel()
	if !errors.Is(err, local.ErrMissingSentinel) || !strings.Contains(err.Error(), "apt-get install redis-sentinel") {
		t.Fatalf("the error must say how to install redis-sentinel, got %v", err)
	}
}
