package harness

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// clientPhase is the clients' workload and what it needs.
type clientPhase struct {
	wcfg    workloads.Config
	env     workloads.Env
	holder  *holderTracker
	granted chan struct{} // a lease was just granted, for faults aimed after a grant
	// monitor is the fault phase's primary monitor (nil without one),
	// told of every grant: set before any client runs.
	monitor *primaryMonitor
	closers closeAll
}

func (cp *clientPhase) close() { cp.closers.Close() }

// lockKey is the name of the i-th lock key.
func lockKey(i int) string { return fmt.Sprintf("lock-%d", i) }

// newClients prepares the workload: its keys and timings, how each client
// builds its lock, the protected resource, and who holds the lock now.
func (r *runner) newClients(rec *history.Recorder, sys *system) *clientPhase {
	cfg := r.cfg
	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = lockKey(i)
	}
	hold, _ := workloads.ParseDist(cfg.Hold) // validated
	cp := &clientPhase{
		wcfg: workloads.Config{
			Workload: cfg.Workload, Keys: keys, TTL: cfg.TTL, Hold: hold,
			LongHoldRate: cfg.LongHoldRate, RetryBackoff: cfg.RetryBackoff,
			OpTimeout: cfg.OpTimeout, Seed: cfg.Seed,
			RenewMode: cfg.renewMode(), RenewTTLs: cfg.renewTTLs(), RenewBefore: cfg.RenewBefore,
		},
		holder:  &holderTracker{},
		granted: make(chan struct{}, 1),
	}
	cp.env = workloads.Env{
		Rec:       rec,
		NewLocker: r.lockerFactory(sys.mesh, sys.cl.Nodes()),
		OnPanic: func(p int, v any) {
			r.mu.Lock()
			r.panics = append(r.panics, fmt.Sprintf("client process %d panicked: %v", p, v))
			r.mu.Unlock()
		},
		OnGrant: func(key, token string, nodes []string) {
			if cp.monitor != nil {
				cp.monitor.grantedBy(context.Background(), key, nodes)
			}
			cp.holder.granted(key, token, nodes)
			select {
			case cp.granted <- struct{}{}:
			default:
			}
		},
	}
	switch {
	case len(cfg.Client) > 0:
		cp.env.NewLocker = r.externalLockerFactory(sys)
	case sys.sc != nil:
		cp.env.NewLocker = r.failoverLockerFactory(sys.mesh, sys.targets)
	case sys.slots != nil:
		cp.env.NewLocker = r.clusterLockerFactory(sys.mesh, sys.targets)
	}
	if res := sys.cl.Resource(); res != nil {
		resource := redis.NewClient(r.clientOptions(res.Addr, cfg.Clients))
		cp.closers = append(cp.closers, resource)
		cp.env.Resource = &workloads.Resource{Client: resource}
	}
	if cfg.system().Majority {
		// For locks that do not say which nodes granted (redsync), ask
		// the nodes themselves, directly, when the nemesis aims.
		for _, n := range sys.cl.Nodes() {
			c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DisableIdentity: true,
				DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, PoolSize: 1})
			cp.closers = append(cp.closers, c)
			cp.holder.direct = append(cp.holder.direct, namedClient{n.Name, c})
		}
	}
	return cp
}

// faultPhase is the nemesis: the schedule, and on Sentinel the monitor
// that records which node is primary.
type faultPhase struct {
	sched   *nemesis.Schedule
	monitor *primaryMonitor // nil but on Sentinel
}

// newFaults builds the fault schedule and checks, before anything runs,
// that every fault applies to the system.
func (r *runner) newFaults(rec *history.Recorder, sys *system, cp *clientPhase) (*faultPhase, error) {
	cfg := r.cfg
	var names []string
	for _, n := range sys.cl.Nodes() {
		names = append(names, n.Name)
	}
	nenv := &nemesis.Env{
		Rec: rec, Nodes: names, Mesh: sys.mesh, FakeClock: sys.fakeClock,
		Persistence: cfg.Persistence, Clients: cfg.Clients, TTL: cfg.TTL,
		Holder: cp.holder.nodes, Granted: cp.granted,
		ClientProcesses: len(cfg.Client) > 0,
	}
	// The backend's own internal network (containers), for isolate and
	// internal faults on nodes without a "net" link in the mesh.
	nenv.Internal, _ = sys.cl.(nemesis.InternalNet)
	nenv.Pauser, _ = sys.cl.(cluster.Pauser)
	nenv.Killer, _ = sys.cl.(cluster.Killer)
	nenv.Clock, _ = sys.cl.(cluster.ClockSetter)
	clocks, err := r.newClientClocks()
	if err != nil {
		return nil, err
	}
	if clocks != nil {
		r.clocks, nenv.ClientClock = clocks, clocks
	}
	fp := &faultPhase{}
	if sys.primaries != nil {
		fp.monitor = newPrimaryMonitor(sys.primaries, rec, names[0])
		cp.monitor = fp.monitor
		nenv.Primary = fp.monitor.current
		nenv.OnEvent = fp.monitor.faultEvent
	}
	if sys.sc != nil {
		nenv.ManualFailover = sys.sc.Failover
	}
	clientFaults := nemesis.NewClientFaults(rec, cfg.TTL, cfg.Seed)
	clientFaults.Mesh = sys.mesh // a pause freezes the client's own links, if it has some
	cp.env.Hooks = clientFaults
	jump, _ := cfg.ClockJumpDuration() // validated
	sched, err := nemesis.NewSchedule(nenv, cfg.Nemesis, nemesis.Options{
		Interval: cfg.NemesisInterval, Duration: cfg.FaultDuration, Targets: cfg.Targets,
		RestartDelay: cfg.RestartDelay, LoseUnsynced: cfg.LoseUnsynced, ClockJump: jump, AfterGrant: cfg.AfterAcquire,
		ClockRate: cfg.ClockRate, Latency: cfg.Latency, Jitter: cfg.Jitter, BandwidthKB: cfg.Bandwidth,
		OpTimeout: cfg.OpTimeout,
	}, rand.New(rand.NewSource(cfg.Seed)), cfg.steps(), clientFaults)
	if err != nil {
		return nil, &UsageError{err}
	}
	fp.sched = sched
	return fp, nil
}

// holderTracker remembers which nodes granted the latest lease, for the
// nemesis's holder target.
type holderTracker struct {
	direct []namedClient // nodes to ask, for locks that do not say

	mu         sync.Mutex
	latest     []string
	key, token string
}

type namedClient struct {
	name string
	c    *redis.Client
}

func (h *holderTracker) granted(key, token string, nodes []string) {
	h.mu.Lock()
	h.latest, h.key, h.token = nodes, key, token
	h.mu.Unlock()
}

func (h *holderTracker) nodes() []string {
	h.mu.Lock()
	latest, key, token := h.latest, h.key, h.token
	h.mu.Unlock()
	if len(latest) > 0 || key == "" || len(h.direct) == 0 {
		return latest
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var holding []string
	for _, n := range h.direct {
		if v, err := n.c.Get(ctx, key).Result(); err == nil && v == token {
			holding = append(holding, n.name)
		}
	}
	return holding
}

// finalReads records the resource's final values, after every client has
// stopped, as reads of a process that did nothing else.
func finalReads(rec *history.Recorder, res *workloads.Resource, keys []string, process int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, key := range keys {
		rec.Record(history.Op{Process: process, Type: history.Invoke, F: history.Read, Key: key})
		n, err := res.Read(ctx, key, nil)
		done := history.Op{Process: process, Type: history.OK, F: history.Read, Key: key, Value: &history.Value{N: history.I64(n)}}
		if err != nil {
			done.Type, done.Value, done.Error = history.Info, nil, err.Error()
		}
		rec.Record(done)
	}
}
