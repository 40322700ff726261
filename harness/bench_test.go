package harness_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/locks"
)

// benchClients and benchKeys: the speed target of the benchmark issue is 16
// clients with zero hold time. Each client draws among as many keys, so
// that most attempts succeed and release, as a bare loop would.
const benchClients, benchKeys = 16, 16

// BenchmarkOpsHarness runs a fault-free single/token test and reports the
// acquire+release cycles per second the harness achieved, recording and
// checking included (only the run, not the check, is timed).
func BenchmarkOpsHarness(b *testing.B) {
	redistest.RequireBinary(b)
	for i := 0; i < b.N; i++ {
		cfg := harness.DefaultConfig()
		cfg.Store = b.TempDir()
		cfg.Clients, cfg.Keys = benchClients, benchKeys
		cfg.Hold, cfg.RetryBackoff = "0", 0
		cfg.TimeLimit, cfg.Recovery = 5*time.Second, 0
		out, err := harness.Run(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		secs := float64(out.Results.Stats.Duration) / 1e9
		b.ReportMetric(float64(out.Results.Liveness.AcquireAttempts)/secs, "cycles/s")
		b.ReportMetric(float64(out.Results.Liveness.AcquireOK)/secs, "grants/s")
	}
}

// BenchmarkOpsBareLoop does what the harness's clients do, with go-redis
// alone: per client, SET NX PX on a random key and, if granted, the Lua
// compare-and-delete. Compare its cycles/s with BenchmarkOpsHarness.
func BenchmarkOpsBareLoop(b *testing.B) {
	s, _ := redistest.Start(b)
	for i := 0; i < b.N; i++ {
		var cycles, grants atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var wg sync.WaitGroup
		for c := 0; c < benchClients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DisableIdentity: true, PoolSize: 2})
				defer rdb.Close()
				l, _ := locks.NewRedisLock(rdb, locks.Token, fmt.Sprintf("p%d", c))
				r := rand.New(rand.NewSource(int64(c)))
				for ctx.Err() == nil {
					lease, err := l.TryAcquire(ctx, fmt.Sprintf("lock-%d", r.Intn(benchKeys)), 500*time.Millisecond)
					cycles.Add(1)
					if err == nil {
						grants.Add(1)
						lease.Release(ctx)
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		b.ReportMetric(float64(cycles.Load())/5, "cycles/s")
		b.ReportMetric(float64(grants.Load())/5, "grants/s")
	}
}

// BenchmarkStartRedlock5 measures the start-up of a 5-node Redlock cluster
// plus a proxy per client and node (the target: under 2 s).
func BenchmarkStartRedlock5(b *testing.B) {
	redistest.RequireBinary(b)
	for i := 0; i < b.N; i++ {
		cl, err := local.Backend{}.Start(context.Background(), cluster.Spec{
			System: cluster.Redlock, Nodes: 5, Dir: b.TempDir(), Persistence: cluster.PersistNone,
		})
		if err != nil {
			b.Fatal(err)
		}
		mesh := proxy.NewMesh()
		for c := 0; c < 10; c++ {
			for _, n := range cl.Nodes() {
				if _, err := mesh.Add(fmt.Sprintf("c%d", c), n.Name, n.Addr, ""); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		mesh.Close()
		cl.Close(context.Background())
		b.StartTimer()
	}
}
