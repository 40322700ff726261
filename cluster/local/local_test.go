package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
