package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/testutil"
)

// requireDocker skips the test when no Docker engine answers, unless
// LOCKJEPSEN_REQUIRE_DOCKER is set (CI on this machine), where it fails.
// It also builds the default image once per test binary.
func requireDocker(t *testing.T) {
	t.Helper()
	engineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engineErr = docker.Available(ctx)
		if engineErr != nil {
			return
		}
		if os.Getenv(docker.ImageEnv) != "" {
			return // the user's image: nothing to build
		}
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "..", "..", "docker", "build-image.sh")
		buildErr = testutil.RunBounded(imageBuildTimeout, "docker/build-image.sh --toxiproxy", "", "bash", script, "--toxiproxy")
	})
	if engineErr != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_DOCKER") != "" {
			t.Fatalf("LOCKJEPSEN_REQUIRE_DOCKER is set but: %v", engineErr)
		}
		t.Skipf("skipping: %v", engineErr)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

var (
	engineOnce sync.Once
	engineErr  error
	buildErr   error
)

// Deadlines of the tests' own waits, sized for a cold, loaded 2-core
// machine.
const (
	// imageBuildTimeout bounds docker/build-image.sh --toxiproxy: 66 s
	// measured from nothing on an idle 2-core machine (the toxiproxy
	// server is compiled from its Go module, and the Redis image's
	// libraries are copied and packed); compilers and -race tests on the
	// same cores can make it two or three times slower.
	imageBuildTimeout = 5 * time.Minute
	// startDeadline bounds one Backend.Start in the tests: above the sum
	// of its own waits (a container's start, its readiness, and the
	// sentinel system's two agreement waits), so that the error that
	// ends a slow start is the backend's, which says what was missing.
	startDeadline = docker.StartTimeout + docker.ReadyTimeout + 2*docker.SentinelAgreeTimeout
	// rdbTimeout bounds each dial, read and write of the tests' own
	// clients (rdb).
	rdbTimeout = 5 * time.Second
)

// start starts a cluster and registers its Close (and a check that nothing
// is left) as cleanup.
func start(t *testing.T, b docker.Backend, spec cluster.Spec) *docker.Cluster {
	t.Helper()
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	if spec.Persistence == "" {
		spec.Persistence = cluster.PersistNone
	}
	if spec.Nodes == 0 {
		spec.Nodes = cluster.DefaultNodes(spec.System)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startDeadline)
	defer cancel()
	cl, err := b.Start(ctx, spec)
	if err != nil {
		t.Fatalf("start %s: %v", spec.System, err)
	}
	c := cl.(*docker.Cluster)
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		requireGone(t, c)
	})
	return c
}

// requireGone checks through the Docker API that a closed cluster left no
// container and no network.
func requireGone(t *testing.T, c *docker.Cluster) {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, id := range c.Containers() {
		if _, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil {
			t.Errorf("container of %s (%s) still exists after Close", name, id[:12])
		}
	}
	if net := c.Network(); net != "" {
		if _, err := cli.NetworkInspect(ctx, net, client.NetworkInspectOptions{}); err == nil {
			t.Errorf("network %s still exists after Close", net)
		}
	}
}

// rdb is a client for the tests' own checks on a node, without retries.
// Its timeouts are for a loaded machine: with 300 ms, a SET on a healthy
// container timed out while four tests of this package ran beside a
// busy machine's load (a paused node's PING still times out, later).
func rdb(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true,
		DialTimeout: rdbTimeout, ReadTimeout: rdbTimeout, WriteTimeout: rdbTimeout})
	t.Cleanup(func() { c.Close() })
	return c
}

// requireIsolatesStopped checks that a run's history has at least one
// isolate, that each was stopped, and that none failed; it returns how
// many there were.
func requireIsolatesStopped(t *testing.T, runDir string) int {
	t.Helper()
	h, err := history.ReadFile(runfile.HistoryPath(runDir))
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]int{}
	for _, op := range h.Ops {
		if op.F == nemesis.Isolate && op.Value != nil {
			phases[op.Value.Phase]++
			if op.Error != "" {
				t.Errorf("isolate %s: %s", op.Value.Phase, op.Error)
			}
		}
	}
	if phases["start"] == 0 || phases["stop"] != phases["start"] {
		t.Errorf("isolate events %v: want at least one, each stopped", phases)
	}
	return phases["start"]
}
