package docker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
)

func TestSingleAndRedlockStart(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	for _, sys := range []string{cluster.Single, cluster.Redlock} {
		t.Run(sys, func(t *testing.T) {
			t.Parallel()
			c := start(t, docker.Backend{}, cluster.Spec{System: sys, Resource: true})
			nodes := c.Nodes()
			if len(nodes) != cluster.DefaultNodes(sys) {
				t.Fatalf("%d nodes, want %d", len(nodes), cluster.DefaultNodes(sys))
			}
			all := append(nodes, *c.Resource())
			for _, n := range all {
				host, _, err := net.SplitHostPort(n.Addr)
				if err != nil || !net.ParseIP(host).IsLoopback() {
					t.Errorf("node %s address %q is not loopback", n.Name, n.Addr)
				}
				if err := rdb(t, n.Addr).Ping(context.Background()).Err(); err != nil {
					t.Errorf("PING %s: %v", n.Name, err)
				}
			}
		})
	}
}

func TestPauseResume(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	c := start(t, docker.Backend{}, cluster.Spec{System: cluster.Single})
	n := c.Nodes()[0]
	r := rdb(t, n.Addr)
	ctx := context.Background()
	if err := r.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(n.Name); err != nil {
		t.Fatal(err)
	}
	if err := r.Ping(ctx).Err(); err == nil {
		t.Error("PING answered while the node was paused")
	} else if !isTimeout(err) {
		t.Errorf("PING while paused: %v, want a timeout", err)
	}
	if err := c.Resume(n.Name); err != nil {
		t.Fatal(err)
	}
	// The timed-out connection was dropped; a new one answers.
	if err := r.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after resume: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestKillRestartKeepsPortAndData(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	c := start(t, docker.Backend{}, cluster.Spec{System: cluster.Single, Persistence: cluster.PersistAlways})
	n := c.Nodes()[0]
	ctx := context.Background()
	r := rdb(t, n.Addr)
	if err := r.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(n.Name, true); !errors.Is(err, docker.ErrLoseUnsynced) {
		t.Errorf("Kill with loseUnsynced: %v, want ErrLoseUnsynced", err)
	}
	if err := r.Ping(ctx).Err(); err != nil {
		t.Fatalf("a refused lose-unsynced kill must not kill: %v", err)
	}
	if err := c.Kill(n.Name, false); err != nil {
		t.Fatal(err)
	}
	if err := r.Ping(ctx).Err(); err == nil {
		t.Error("PING answered after kill")
	}
	if err := c.Restart(ctx, n.Name); err != nil {
		t.Fatal(err)
	}
	if got := c.Nodes()[0].Addr; got != n.Addr {
		t.Errorf("address after restart %s, want %s", got, n.Addr)
	}
	if v, err := r.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Errorf("GET after restart: %q, %v; want the value written before the kill", v, err)
	}
}

func TestSetClockExpiresKeyEarly(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	c := start(t, docker.Backend{}, cluster.Spec{System: cluster.Single, FakeClock: true})
	n := c.Nodes()[0]
	ctx := context.Background()
	r := rdb(t, n.Addr)
	before, err := r.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(before); d > 2*time.Second || d < -2*time.Second {
		t.Fatalf("node clock off by %v before any SetClock", d)
	}
	if err := r.Set(ctx, "k", "v", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetClock(n.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The key expires on the next read after the clock file changes; the
	// deadline is for a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := r.Get(ctx, "k").Result()
		if errors.Is(err, redis.Nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key with 30s TTL still there 10s after the clock moved 1m forward (err %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	now, err := r.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(now); d < 55*time.Second || d > 65*time.Second {
		t.Errorf("node clock ahead by %v, want about 1m", d)
	}
	if err := c.SetClock(n.Name, 0); err != nil {
		t.Fatal(err)
	}
}

// A clock fault with an image that has no libfaketime is refused by Start,
// before any container exists.
func TestFakeClockRefusedWithoutLibfaketime(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	tag := fmt.Sprintf("lockjepsen-test/no-faketime:%d", time.Now().UnixNano())
	// One layer of labels on a local image: seconds, but bounded.
	bctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, "docker", "build", "-q", "-t", tag, "-")
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	build.Stdin = strings.NewReader(fmt.Sprintf("FROM %s\nLABEL %s=\"\"\n", docker.DefaultImage, docker.LabelPreload))
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build (deadline 2m, %v): %v\n%s", bctx.Err(), err, out)
	}
	_, err := docker.Backend{Image: tag}.Start(context.Background(), cluster.Spec{
		System: cluster.Single, Nodes: 1, Dir: t.TempDir(), Persistence: cluster.PersistNone, FakeClock: true,
	})
	if !errors.Is(err, docker.ErrNoFakeClock) {
		t.Fatalf("Start: %v, want ErrNoFakeClock", err)
	}
	if !strings.Contains(err.Error(), tag) {
		t.Errorf("error does not name the image: %v", err)
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "ancestor="+tag).Output()
	if len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("containers were created: %s", out)
	}
}

// With no engine, Start fails at once with ErrNoEngine. Run in a child
// process: testcontainers reads DOCKER_HOST once per process.
func TestNoEngineFailsFast(t *testing.T) {
	if os.Getenv("LOCKJEPSEN_DOCKER_CHILD") == "no-engine" {
		start := time.Now()
		_, err := docker.Backend{}.Start(context.Background(), cluster.Spec{
			System: cluster.Single, Nodes: 1, Dir: t.TempDir(), Persistence: cluster.PersistNone,
		})
		if !errors.Is(err, docker.ErrNoEngine) {
			t.Fatalf("Start: %v, want ErrNoEngine", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("Start took %v to fail", d)
		}
		fmt.Println("ERR:", err)
		// The harness asks for orphans before every run: with no engine
		// there is nothing to reap, and the answer is immediate.
		start = time.Now()
		if lines := (docker.Backend{}).ReapOrphans(context.Background()); lines != nil {
			t.Fatalf("ReapOrphans with no engine: %q, want nil", lines)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("ReapOrphans took %v with no engine", d)
		}
		return
	}
	// testcontainers falls back from a dead DOCKER_HOST to the default
	// socket, so the child runs in a private mount namespace where
	// /var/run is an empty tmpfs: no engine at all.
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to hide the Docker socket from a child process")
	}
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs tmpfs /var/run && mount -t tmpfs tmpfs /run && exec "$0" "$@"`,
		os.Args[0], "-test.run=^TestNoEngineFailsFast$", "-test.v")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DOCKER_HOST=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "LOCKJEPSEN_DOCKER_CHILD=no-engine", "TESTCONTAINERS_RYUK_DISABLED=true", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
