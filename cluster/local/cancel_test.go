package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// TestStartCancelled cancels Start's context at every process it creates
// (the k-th, counted by the backend's launch hook, which runs synchronously
// right after the process exists) and before it begins (k = 0), on every
// system of the local backend. Whatever the point, Start must return an
// error that wraps context.Canceled and carries no log dump, create no
// further process after the cancellation, and leave none of the processes
// it created running, nor a fake clock's shared-memory files behind.
func TestStartCancelled(t *testing.T) {
	fake := true
	if _, err := fakeclock.Prepare(context.Background(), filepath.Join(t.TempDir(), "cache")); err != nil {
		t.Logf("no fake clock here, shm clean-up not checked: %v", err)
		fake = false
	}
	for _, tc := range []struct {
		system string
		procs  int // processes a start creates, with the resource
		skip   func(*testing.T)
	}{
		{cluster.Single, 2, func(t *testing.T) { requireRedis(t) }},
		{cluster.Redlock, 6, func(t *testing.T) { requireRedis(t) }},
		{cluster.Sentinel, 7, requireSentinel},
		{cluster.Etcd, 4, func(t *testing.T) { redistest.RequireEtcd(t); requireRedis(t) }},
	} {
		t.Run(tc.system, func(t *testing.T) {
			tc.skip(t)
			for k := 0; k <= tc.procs; k++ {
				t.Run(fmt.Sprintf("at-process-%d", k), func(t *testing.T) {
					startCancelledAt(t, tc.system, k, fake && tc.system != cluster.Etcd)
				})
			}
		})
	}
}

func requireRedis(t *testing.T) {
	t.Helper()
	if _, err := local.FindRedisServer(); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

func startCancelledAt(t *testing.T, system string, k int, fake bool) {
	dir := t.TempDir()
	spec := cluster.Spec{
		System: system, Nodes: cluster.DefaultNodes(system), Dir: dir,
		Persistence: cluster.PersistNone, Resource: true, FakeClock: fake,
	}
	if system == cluster.Sentinel || system == cluster.Etcd {
		mesh := proxy.NewMesh()
		defer mesh.Close()
		spec.Mesh = meshOf(mesh)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var pids []int
	restore := local.SetLaunchHook(func(d string, pid int) {
		if !strings.HasPrefix(d, dir+string(filepath.Separator)) {
			return // another test's cluster
		}
		mu.Lock()
		defer mu.Unlock()
		pids = append(pids, pid)
		if len(pids) == k {
			cancel()
		}
	})
	defer restore()
	if k == 0 {
		cancel()
	}
	start := time.Now()
	cl, err := local.Backend{}.Start(ctx, spec)
	took := time.Since(start).Round(time.Millisecond)
	mu.Lock()
	seen := append([]int(nil), pids...)
	mu.Unlock()
	if err == nil {
		cl.Close(context.Background())
		t.Fatalf("Start succeeded (%d processes) although cancelled at process %d", len(seen), k)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error does not wrap context.Canceled: %v", err)
	}
	if s := err.Error(); strings.Contains(s, "--- ") || strings.Contains(s, "\n") {
		t.Fatalf("the error of a cancelled start carries a log dump:\n%s", s)
	}
	if len(seen) != k {
		t.Fatalf("%d processes created, want %d: Start went on after the cancellation", len(seen), k)
	}
	for _, pid := range seen {
		// Start reaps what it stops before it returns, so this should
		// hold at once; the poll only keeps a loaded machine from
		// making a slow exit look like a leak.
		eventually(t, waitDeadline, fmt.Sprintf("pid %d gone after the cancelled Start returned", pid), func() error {
			if alive(pid) {
				return errors.New("still running")
			}
			return nil
		})
		// pid_max is 32768 on this kind of machine, and the suite starts
		// thousands of processes: a faked node of another test may have
		// been given this pid since, and its files are its own. Only files
		// no live process can own are a leak (a CI run failed on
		// /dev/shm/faketime_shm_20724 for this).
		if left := shmLeft(pid); len(left) != 0 && !alive(pid) {
			t.Fatalf("pid %d left %v", pid, left)
		} else if len(left) != 0 {
			t.Logf("pid %d was reused by a live process, which owns %v", pid, left)
		}
	}
	t.Logf("%s, cancelled at process %d: %v after %v", system, k, err, took)
}
