// Package redistest starts real redis-server processes for tests. Tests that
// need one skip when redis-server is not installed, unless
// LOCKJEPSEN_REQUIRE_REDIS is set (as CI does), where they fail instead.
package redistest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
)

// RequireBinary skips (or, in CI, fails) the test without redis-server.
func RequireBinary(t testing.TB) string {
	t.Helper()
	p, err := local.FindRedisServer()
	if err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	return p
}

// RequireEtcd skips (or, with LOCKJEPSEN_REQUIRE_ETCD, as CI sets it,
// fails) the test without the etcd binary.
func RequireEtcd(t testing.TB) {
	t.Helper()
	if _, err := local.FindEtcd(); err != nil {
		if os.Getenv("LOCKJEPSEN_REQUIRE_ETCD") != "" {
			t.Fatalf("etcd is required: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// Start runs one redis-server on a free loopback port for the duration of
// the test and returns it with a client.
func Start(t testing.TB, extraArgs ...string) (*local.Server, *redis.Client) {
	t.Helper()
	bin := RequireBinary(t)
	dir := t.TempDir()
	s := local.NewServer(bin, "n1", "node", local.Host, 0, filepath.Join(dir, "data"), filepath.Join(dir, "redis.log"), extraArgs)
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(s.Stop)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DisableIdentity: true, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return s, c
}

// ClusterClient is a client of a Redis Cluster as an application has one:
// it learns the slots from the nodes and follows redirections. The nodes
// announce the cluster's own links (or proxies); the client dials each
// node's real address instead.
func ClusterClient(t testing.TB, nodes []cluster.Node) *redis.ClusterClient {
	real := map[string]string{}
	var seeds []string
	for _, n := range nodes {
		real[n.Announce] = n.Addr
		seeds = append(seeds, n.Addr)
	}
	var d net.Dialer
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: seeds, MaxRedirects: 3, DisableIdentity: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if a, ok := real[addr]; ok {
				addr = a
			}
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
