package harness

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// LockerFactory builds the lock under test for one client process, given a
// connection to the system's node that the harness owns and closes.
type LockerFactory func(rdb *redis.Client, process int) (locks.Locker, error)

// RunInfo is what happened during a run, beyond the history: written to
// run.json so that a later `check` keeps it.
type RunInfo struct {
	Started      time.Time      `json:"started"`
	Ended        time.Time      `json:"ended"`
	Interrupted  bool           `json:"interrupted"`
	RedisVersion string         `json:"redis_version,omitempty"`
	Backend      string         `json:"backend"`
	Nodes        []cluster.Node `json:"nodes"`
	Resource     *cluster.Node  `json:"resource,omitempty"`
	// Errors are harness problems that did not stop the run: a fault that
	// failed to heal, a client that panicked.
	Errors []string `json:"errors,omitempty"`
}

// RunInfoFile holds RunInfo.
const RunInfoFile = "run.json"

// Outcome is a finished run.
type Outcome struct {
	Dir     string
	Config  Config
	Results *Results
}

// HarnessError is a failure of the harness itself (exit code 3): a node that
// would not start, a store that cannot be written. Dir is the run directory
// if one was created, with whatever logs were written.
type HarnessError struct {
	Dir string
	Err error
}

func (e *HarnessError) Error() string { return e.Err.Error() }
func (e *HarnessError) Unwrap() error { return e.Err }

// Run performs one test. Cancelling ctx (Ctrl-C) ends the run early: the
// servers stop, and what was recorded is checked and marked interrupted.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"(Go API)"}
	}
	start := time.Now()
	dir, err := newRunDir(cfg.Store, cfg.TestName(), start)
	if err != nil {
		return nil, &HarnessError{Err: err}
	}
	fail := func(err error) (*Outcome, error) { return nil, &HarnessError{Dir: dir, Err: err} }
	if err := writeJSON(filepath.Join(dir, ConfigFile), cfg); err != nil {
		return fail(err)
	}
	info := &RunInfo{Started: start}
	r := &runner{cfg: cfg, dir: dir, info: info}
	if err := r.run(ctx); err != nil {
		info.Ended = time.Now()
		info.Errors = append(info.Errors, err.Error())
		writeJSON(filepath.Join(dir, RunInfoFile), info)
		return fail(err)
	}
	info.Ended = time.Now()
	info.Interrupted = ctx.Err() != nil
	if err := writeJSON(filepath.Join(dir, RunInfoFile), info); err != nil {
		return fail(err)
	}
	res, err := Check(dir)
	if err != nil {
		return fail(fmt.Errorf("check the run: %w", err))
	}
	return &Outcome{Dir: dir, Config: cfg, Results: res}, nil
}

type runner struct {
	cfg  Config
	dir  string
	info *RunInfo

	mu     sync.Mutex
	panics []string
}

func (r *runner) say(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, format+"\n", a...)
	}
}

func (r *runner) run(ctx context.Context) error {
	cfg := r.cfg
	backend := cfg.Backend
	if backend == nil {
		backend = local.Backend{}
	}
	r.info.Backend = backend.Name()
	spec := cluster.Spec{
		System: cfg.System, Nodes: 1, Dir: r.dir, Persistence: cfg.Persistence,
		Resource: cfg.Workload == workloads.Counter,
	}
	r.say("starting %s system (%s backend) in %s", cfg.System, backend.Name(), r.dir)
	cl, err := backend.Start(ctx, spec)
	if err != nil {
		return fmt.Errorf("start the %s system: %w", cfg.System, err)
	}
	// Always stop the servers, whatever happens below; a panic elsewhere
	// in the harness still runs this.
	defer cl.Close(context.Background())
	r.info.Nodes, r.info.Resource = cl.Nodes(), cl.Resource()
	node := cl.Nodes()[0]
	r.info.RedisVersion = redisVersion(ctx, node.Addr)

	rec, err := history.Create(filepath.Join(r.dir, HistoryFile), time.Now())
	if err != nil {
		return err
	}
	defer rec.Close()

	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("lock-%d", i)
	}
	hold, _ := workloads.ParseDist(cfg.Hold) // validated
	wcfg := workloads.Config{
		Workload: cfg.Workload, Keys: keys, TTL: cfg.TTL, Hold: hold,
		LongHoldRate: cfg.LongHoldRate, RetryBackoff: cfg.RetryBackoff,
		OpTimeout: cfg.OpTimeout, Seed: cfg.Seed,
	}
	env := workloads.Env{
		Rec:       rec,
		NewLocker: r.lockerFactory(node.Addr),
		OnPanic: func(p int, v any) {
			r.mu.Lock()
			r.panics = append(r.panics, fmt.Sprintf("client process %d panicked: %v", p, v))
			r.mu.Unlock()
		},
	}
	var resource *redis.Client
	if res := cl.Resource(); res != nil {
		resource = redis.NewClient(r.clientOptions(res.Addr, cfg.Clients))
		defer resource.Close()
		env.Resource = &workloads.Resource{Client: resource}
	}

	sched := &nemesis.Schedule{Interval: cfg.NemesisInterval, Rng: rand.New(rand.NewSource(cfg.Seed)), Rec: rec}
	if len(cfg.Nemesis) > 0 {
		cf := nemesis.NewClientFaults(rec, cfg.TTL, cfg.Clients)
		env.Hooks = cf
		for _, name := range cfg.Nemesis {
			sched.Faults = append(sched.Faults, cf.Fault(name))
		}
	}

	runCtx, stopClients := context.WithTimeout(ctx, cfg.TimeLimit+cfg.Recovery)
	defer stopClients()
	faultCtx, stopFaults := context.WithTimeout(ctx, cfg.TimeLimit)
	defer stopFaults()

	var wg sync.WaitGroup
	var healErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		healErr = sched.Run(faultCtx)
		if len(sched.Faults) > 0 && ctx.Err() == nil {
			r.say("faults healed; recovery phase of %s", cfg.Recovery)
		}
	}()
	progressDone := make(chan struct{})
	go r.progress(runCtx, rec, progressDone)

	r.say("running %d clients for %s (+%s recovery), lock %s, workload %s, nemesis %s, seed %d",
		cfg.Clients, cfg.TimeLimit, cfg.Recovery, lockName(cfg), cfg.Workload, nemesisName(cfg), cfg.Seed)
	werr := workloads.Run(runCtx, wcfg, env, cfg.Clients)
	stopFaults()
	wg.Wait()
	<-progressDone

	if cfg.Workload == workloads.Counter && resource != nil {
		finalReads(rec, env.Resource, keys, cfg.Clients*1_000_000)
	}
	if err := rec.Close(); err != nil {
		return err
	}
	if healErr != nil {
		r.info.Errors = append(r.info.Errors, healErr.Error())
	}
	r.info.Errors = append(r.info.Errors, r.panics...)
	if werr != nil {
		return werr
	}
	return nil
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

func (r *runner) clientOptions(addr string, pool int) *redis.Options {
	return &redis.Options{
		Addr: addr,
		// Retrying would hide unknown outcomes (and could apply a command
		// twice); the history must see every attempt as it happened.
		MaxRetries:            -1,
		DialTimeout:           r.cfg.OpTimeout,
		ReadTimeout:           r.cfg.OpTimeout,
		WriteTimeout:          r.cfg.OpTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              pool,
		MinIdleConns:          0,
		DisableIdentity:       true,
	}
}

func (r *runner) lockerFactory(addr string) workloads.LockerFactory {
	return func(process int) (locks.Locker, io.Closer, error) {
		rdb := redis.NewClient(r.clientOptions(addr, 2))
		var l locks.Locker
		var err error
		if r.cfg.Locker != nil {
			l, err = r.cfg.Locker(rdb, process)
		} else {
			l, err = locks.NewRedisLock(rdb, r.cfg.Lock, fmt.Sprintf("p%d", process))
		}
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return l, rdb, nil
	}
}

func (r *runner) progress(ctx context.Context, rec *history.Recorder, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			elapsed := time.Duration(rec.Now()).Round(time.Second)
			r.say("[%s/%s] %d events recorded", elapsed, (r.cfg.TimeLimit + r.cfg.Recovery).Round(time.Second), rec.Count())
		}
	}
}

func redisVersion(ctx context.Context, addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	s, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

func lockName(cfg Config) string {
	if cfg.Locker != nil {
		return "custom"
	}
	return cfg.Lock
}

func nemesisName(cfg Config) string {
	if len(cfg.Nemesis) == 0 {
		return "none"
	}
	return strings.Join(cfg.Nemesis, ",")
}
