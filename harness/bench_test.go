package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/testkit/opsbench"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// benchClients and benchKeys: the speed target of the benchmark issue is 16
// clients with zero hold time. Each client draws among as many keys, so
// that most attempts succeed and release, as a bare loop would.
const benchClients, benchKeys = 16, 16

// BenchmarkOpsHarness runs a fault-free single/token test and reports the
// acquire+release cycles per second the harness achieved, recording
// included, and the CPU per cycle of this process and of redis-server
// while the clients ran (the check after the run is neither timed nor
// counted; the check alongside it is).
func BenchmarkOpsHarness(b *testing.B) {
	redistest.RequireBinary(b)
	var sum opsbench.Result
	for i := 0; i < b.N; i++ {
		res, err := runHarness(b, benchClients, benchKeys)
		if err != nil {
			b.Fatal(err)
		}
		sum = sum.Add(res)
	}
	report(b, sum)
}

// BenchmarkServerRecord measures what the server record costs a run:
// without it and with it, in turn in each iteration so that both share
// the machine's moment, in two shapes: BenchmarkOpsHarness's (16 clients
// on 16 keys, no hold: nearly every cycle a grant, the record's worst
// case) and the default contended one (10 clients on one key, holds of
// 0-20 ms, 2 ms backoff: most cycles a refused SET, which the record
// does not see). The metrics are each one's cycles/s and client plus
// redis-server CPU per cycle.
func BenchmarkServerRecord(b *testing.B) {
	redistest.RequireBinary(b)
	def := harness.DefaultConfig()
	shapes := []struct {
		name          string
		clients, keys int
		shape         func(*harness.Config)
	}{
		{"busy", benchClients, benchKeys, func(*harness.Config) {}},
		{"contended", def.Clients, def.Keys, func(c *harness.Config) { c.Hold, c.RetryBackoff = def.Hold, def.RetryBackoff }},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			var sums [2]opsbench.Result
			for i := 0; i < b.N; i++ {
				for on := range sums {
					res, err := runHarness(b, sh.clients, sh.keys, sh.shape, func(c *harness.Config) { c.ServerRecord = on == 1 })
					if err != nil {
						b.Fatal(err)
					}
					sums[on] = sums[on].Add(res)
				}
			}
			for on, name := range []string{"off", "on"} {
				b.ReportMetric(sums[on].PerSecond(), name+"-cycles/s")
				b.ReportMetric(sums[on].TotalPerCycle(), name+"-total-ns/op")
			}
		})
	}
}

// runHarness runs a fault-free single/token test of 5 s with zero hold and
// retry backoff, changed by each of opts, and measures it.
func runHarness(b *testing.B, clients, keys int, opts ...func(*harness.Config)) (opsbench.Result, error) {
	cfg := harness.DefaultConfig()
	cfg.Store = b.TempDir()
	cfg.Clients, cfg.Keys = clients, keys
	cfg.Hold, cfg.RetryBackoff = "0", 0
	cfg.TimeLimit, cfg.Recovery = 5*time.Second, 0
	for _, o := range opts {
		o(&cfg)
	}
	w := &opsbench.Window{}
	cfg.Progress = w
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		return opsbench.Result{}, err
	}
	cpu, err := w.CPU()
	if err != nil {
		return opsbench.Result{}, err
	}
	srv, err := w.ServerCPU()
	if err != nil {
		return opsbench.Result{}, err
	}
	return opsbench.Result{
		Cycles:  int64(out.Results.Liveness.AcquireAttempts),
		Grants:  int64(out.Results.Liveness.AcquireOK),
		Elapsed: time.Duration(out.Results.Stats.Duration),
		CPU:     cpu,
		Server:  srv,
	}, nil
}

// report gives the rate and the CPU per cycle: this process's
// (cpu-ns/op), redis-server's (server-ns/op) and both (total-ns/op).
func report(b *testing.B, r opsbench.Result) {
	b.ReportMetric(r.PerSecond(), "cycles/s")
	b.ReportMetric(r.GrantsPerSecond(), "grants/s")
	b.ReportMetric(r.CPUPerCycle(), "cpu-ns/op")
	b.ReportMetric(r.ServerPerCycle(), "server-ns/op")
	b.ReportMetric(r.TotalPerCycle(), "total-ns/op")
}

// BenchmarkOpsBareLoop does what the harness's clients do, with go-redis
// alone (opsbench.BareLoop). Compare its cycles/s and cpu-ns/op (an op is
// one cycle) with BenchmarkOpsHarness's.
func BenchmarkOpsBareLoop(b *testing.B) {
	s, _ := redistest.Start(b)
	var sum opsbench.Result
	for i := 0; i < b.N; i++ {
		res, err := opsbench.BareLoop(s.Addr(), benchClients, benchKeys, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		sum = sum.Add(res)
	}
	report(b, sum)
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
