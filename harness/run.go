package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// LockerFactory builds the lock under test for one client process, given
// one connection per node of the system (in node order: a single Redis has
// one) that the harness owns and closes.
type LockerFactory func(nodes []locks.Conn, process int) (locks.Locker, error)

// RunInfo is run.json (see package runfile).
type RunInfo = runfile.RunInfo

// RunInfoFile holds RunInfo.
const RunInfoFile = runfile.RunInfoFile

// Outcome is a finished run.
type Outcome struct {
	Dir     string
	Config  Config
	Results *Results
	// Report is the path of report.html, which the caller draws (the CLI
	// and lockjepsentest do; see reports.WriteRun); ReportError says why
	// there is none.
	Report      string
	ReportError error
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

// InterruptedError is a run stopped by an interrupt while its history was
// being checked: the history is whole, but there is no verdict yet.
type InterruptedError struct {
	Dir string
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted while checking the run; its history is complete: lockjepsen check %s gives the verdict", e.Dir)
}

// HoldEnv names a phase (start-up, faults, recovery, finishing, check) at
// whose start the harness waits until it is interrupted, so that a test can
// deliver a real signal in that phase without racing the run's clock.
const HoldEnv = "LOCKJEPSEN_TEST_HOLD"

// Phases of a run, as run.json's interrupted_in names them.
const (
	PhaseStartup   = "start-up"
	PhaseFaults    = "faults"
	PhaseRecovery  = "recovery"
	PhaseFinishing = "finishing"
	PhaseCheck     = "check"
	// PhaseReport is after the check, while the caller draws the report.
	PhaseReport = "report"
)

// RecordInterrupt marks a run that Run finished as interrupted after all,
// in phase: an interrupt that came after its check, while the caller was
// still at work on it (drawing the report). run.json says so, and the
// results are judged again as any interrupted run's are: the verdict
// stands, with its history, but a safe expectation is not met by a run
// that did not finish. out.Results is updated in place.
func RecordInterrupt(out *Outcome, phase string) error {
	infoPath := filepath.Join(out.Dir, RunInfoFile)
	var info RunInfo
	if err := readJSON(infoPath, &info); err != nil {
		return &HarnessError{Dir: out.Dir, Err: fmt.Errorf("record the interrupt: %w", err)}
	}
	info.Interrupted, info.InterruptedIn = true, phase
	if err := writeJSON(infoPath, info); err != nil {
		return &HarnessError{Dir: out.Dir, Err: fmt.Errorf("record the interrupt: %w", err)}
	}
	res := out.Results
	res.Interrupted = true
	what := interruptedIn(phase)
	if res.Incomplete != "" {
		what += "; " + res.Incomplete
	}
	res.Incomplete = what
	judgeExpectation(res, out.Config)
	if err := writeJSON(filepath.Join(out.Dir, ResultsFile), res); err != nil {
		return &HarnessError{Dir: out.Dir, Err: fmt.Errorf("record the interrupt: %w", err)}
	}
	return nil
}

// Run performs one test. Cancelling ctx (Ctrl-C) ends the run early in any
// phase: the faults are healed, the servers stop, what was recorded is
// kept, checked and marked interrupted. Cancelled while the history is
// being checked, Run returns an *InterruptedError.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"(Go API)"}
	}
	cfg.CustomLock = cfg.Locker != nil || len(cfg.Client) > 0
	if len(cfg.Client) > 0 && cfg.CustomLockName == "" {
		cfg.CustomLockName = clientName(cfg.Client)
	}
	start := time.Now()
	r := &runner{cfg: cfg, info: &RunInfo{Started: start, Described: describe(cfg), ReplayOf: cfg.ReplayOf}, hold: os.Getenv(HoldEnv)}
	r.setPhase(PhaseStartup)
	r.info.Reaped = r.reap(ctx)
	dir, err := newRunDir(cfg.Store, cfg.TestName(), start)
	if err != nil {
		// The store is the user's choice: a bad one is a usage error.
		return nil, usage("--store %s: %v", cfg.Store, err)
	}
	r.dir = dir
	fail := func(err error) (*Outcome, error) { return nil, &HarnessError{Dir: dir, Err: err} }
	if err := writeJSON(filepath.Join(dir, ConfigFile), cfg); err != nil {
		return fail(err)
	}
	if err := writeOwner(dir); err != nil {
		return fail(err)
	}
	// The history exists before anything starts, so that a run stopped
	// at any point leaves one that can be checked.
	rec, err := history.Create(filepath.Join(dir, runfile.CompressedHistoryFile), time.Now())
	if err != nil {
		return fail(err)
	}
	if cfg.RecordFailedAcquires == RecordSummary {
		rec.SummarizeFailedAcquires()
	}
	if cfg.Observer != nil {
		rec.Observe(cfg.Observer)
	}
	r.live = startLiveCheck(ctx, rec, checkOptions(cfg, dir))
	defer func() {
		rec.Close()
		r.live.abandon() // unless finish took its results
	}()
	defer r.tellInterrupt(ctx)()
	runErr := r.run(ctx, rec)
	if err := rec.Close(); err != nil {
		// A full disk: what was recorded before the first failed write
		// is in the file, and stays checkable once there is room.
		return fail(fmt.Errorf("%w; the run stopped at that error. The events recorded before it are in %s: free some space, then check them with lockjepsen check %s", err, rec.Path(), dir))
	}
	r.events = rec.Count() // closed: exactly the events in the file
	r.info.Ended = time.Now()
	if ctx.Err() != nil {
		r.info.Interrupted, r.info.InterruptedIn = true, r.interruptedIn()
		if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
			runErr = nil // the interrupt's own doing, not a failure
		}
	}
	if runErr != nil {
		r.info.Errors = append(r.info.Errors, runErr.Error())
		writeJSON(filepath.Join(dir, RunInfoFile), r.info)
		if IsUsage(runErr) {
			return nil, runErr
		}
		return fail(runErr)
	}
	if err := writeJSON(filepath.Join(dir, RunInfoFile), r.info); err != nil {
		return fail(err)
	}
	return r.finish(ctx)
}

// finish checks the stored run and points store/latest at it. After an interrupt of an earlier phase the check still runs, on
// what was recorded; an interrupt now stops it.
func (r *runner) finish(ctx context.Context) (*Outcome, error) {
	interruptedBefore := ctx.Err() != nil
	r.setPhase(PhaseFinishing)
	checkCtx := ctx
	if interruptedBefore {
		checkCtx = context.WithoutCancel(ctx)
	} else {
		r.holdFor(ctx, PhaseFinishing)
	}
	res, err := checkRun(checkCtx, r.dir, "", r.liveResults(checkCtx, interruptedBefore))
	if err != nil && ctx.Err() != nil && !interruptedBefore {
		r.info.Interrupted, r.info.InterruptedIn = true, PhaseFinishing
		if werr := writeJSON(filepath.Join(r.dir, RunInfoFile), r.info); werr != nil {
			return nil, &HarnessError{Dir: r.dir, Err: werr}
		}
		return nil, &InterruptedError{Dir: r.dir}
	}
	if err != nil {
		return nil, &HarnessError{Dir: r.dir, Err: fmt.Errorf("check the run: %w", err)}
	}
	if res.NotWritten != "" {
		return nil, &HarnessError{Dir: r.dir, Err: errors.New(res.NotWritten)}
	}
	out := &Outcome{Dir: r.dir, Config: r.cfg, Results: res}
	if err := runfile.PointLatest(r.cfg.Store, r.dir); err != nil {
		out.Results.Errors = append(out.Results.Errors, err.Error())
	}
	return out, nil
}

// liveResults are the results of the check alongside the run, or nil
// when the stored history must be checked instead: the run was
// interrupted (its check must not be cut short with it), or the live
// check gave up.
func (r *runner) liveResults(ctx context.Context, interrupted bool) *checker.Results {
	if interrupted {
		r.live.abandon()
		r.say("checking the history (%d events)", r.events)
		return nil
	}
	res, why := r.live.finish(ctx, r.events)
	if res == nil {
		r.say("the check alongside the run stopped (%s); checking the stored history (%d events)", why, r.events)
		return nil
	}
	r.say("checked the history alongside the run (%d events)", r.events)
	return res
}

// describe puts the run's lock, workload and faults into words for
// run.json, so that reports need no lists of their own.
func describe(cfg Config) *runfile.Description {
	d := &runfile.Description{Workload: workloads.Describe(cfg.Workload)}
	if cfg.CustomLock {
		d.Lock, d.CustomLock = cfg.LockLabel()+": a lock of your own (harness.Config.Locker), not one of lockjepsen's", true
		d.BackgroundRenewal, d.Fences = cfg.CustomLockRenews, cfg.CustomLockFences
	} else {
		info := locks.Describe(cfg.Lock)
		d.Lock, d.BackgroundRenewal, d.Fences = info.Description, info.BackgroundRenewal, info.Fences
	}
	// A script's faults are drawn in the report as much as --nemesis's.
	names := append([]string(nil), cfg.Nemesis...)
	for _, st := range cfg.steps() {
		names = append(names, st.Action.Fault)
	}
	for _, n := range names {
		fd, err := nemesis.Lookup(n)
		if err != nil {
			continue // refused by Validate already
		}
		if d.Faults == nil {
			d.Faults = map[string]runfile.FaultDescription{}
		}
		d.Faults[n] = runfile.FaultDescription{Description: fd.Description,
			Class: fd.Draw.Class, Label: fd.Draw.Label, LabelDetail: fd.Draw.LabelDetail}
	}
	if sc, ok := nemesis.Scripts[cfg.ScriptName]; ok {
		d.Script = sc.Description
	}
	return d
}

// reap removes what killed runs left behind: their servers (and clock
// files) in this store, and the backend's containers anywhere.
func (r *runner) reap(ctx context.Context) []string {
	reaped := reapOrphans(r.cfg.Store, r.cfg.runReapers())
	if or, ok := r.cfg.backend().(cluster.OrphanReaper); ok {
		reaped = append(reaped, or.ReapOrphans(ctx)...)
	}
	for _, msg := range reaped {
		r.say("%s", msg)
	}
	return reaped
}

// setPhase enters a phase; with HoldEnv naming it, it first waits there
// until ctx is done (tests only).
func (r *runner) setPhase(p string) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

func (r *runner) holdFor(ctx context.Context, p string) {
	if r.hold != p {
		return
	}
	r.say("holding in phase %s until interrupted (%s is set)", p, HoldEnv)
	<-ctx.Done()
}

func (r *runner) interruptedIn() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phaseAtInterrupt != "" {
		return r.phaseAtInterrupt
	}
	return r.phase
}

// tellInterrupt says, when ctx is cancelled, what the run is doing about
// it: the user pressed Ctrl-C and is waiting.
func (r *runner) tellInterrupt(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		r.mu.Lock()
		r.phaseAtInterrupt = r.phase
		r.mu.Unlock()
		switch r.phaseAtInterrupt {
		case PhaseStartup:
			r.say("interrupted while starting the system: stopping what was started")
		case PhaseFinishing:
			r.say("interrupted while checking the history (%d events): the check stops; the history is complete, and lockjepsen check %s gives the verdict later", r.events, r.dir)
		default:
			r.say("interrupted during the %s phase: healing the faults and stopping the clients and servers; what was recorded is kept and checked", r.phaseAtInterrupt)
		}
	}()
	return func() { close(done); <-finished }
}

type runner struct {
	cfg  Config
	dir  string
	info *RunInfo
	hold string // HoldEnv's phase

	events int64 // recorded, for the finishing message
	live   *liveCheck

	mu               sync.Mutex
	panics           []string
	healthErr        error
	phase            string
	phaseAtInterrupt string
	// clientErrs are external clients that failed during the run, and
	// stopRun ends the fault and client phases early (set while they run).
	clientErrs []string
	stopRun    context.CancelFunc
	// faultsEnded is when the fault phase's time ran out or it was
	// stopped, for schedule.json.
	faultsEnded *time.Time
}

func (r *runner) say(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, format+"\n", a...)
	}
}

func (r *runner) run(ctx context.Context, rec *history.Recorder) error {
	// A failed write to the history (a full disk) ends the run at once:
	// everything recorded from then on would be lost.
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	go func() {
		select {
		case <-rec.Failed():
			stopRun(rec.Err())
		case <-ctx.Done():
		}
	}()
	defer func() { r.events = rec.Count() }()
	// The mesh outlives the cluster: the sentinel and etcd systems' internal
	// links run through it.
	mesh := proxy.NewMesh()
	defer mesh.Close()
	sys, err := r.startSystem(ctx, mesh)
	if err != nil {
		return err
	}
	// Always stop the servers, whatever happens below; a panic elsewhere
	// in the harness still runs this. What could not be removed is said,
	// and kept in run.json: the next run's reaping removes it.
	defer func() {
		if err := sys.cl.Close(context.Background()); err != nil {
			r.info.CleanupFailures = runfile.CleanupFailures(err)
			r.say("warning: stopping the %s system: %v", r.cfg.System, err)
		}
	}()
	if err := r.addClientLinks(sys); err != nil {
		return err
	}
	r.holdFor(ctx, PhaseStartup)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	cp := r.newClients(rec, sys)
	defer cp.close()
	fp, err := r.newFaults(rec, sys, cp)
	if err != nil {
		return err
	}
	werr, healErr := r.runPhases(ctx, rec, sys, cp, fp)
	if workloads.UsesResource(r.cfg.Workload) && cp.env.Resource != nil {
		finalReads(rec, cp.env.Resource, cp.wcfg.Keys, r.cfg.Clients*1_000_000)
	}
	if err := rec.Err(); err != nil {
		return err
	}
	if healErr != nil {
		r.info.Errors = append(r.info.Errors, healErr.Error())
	}
	r.info.ClientPanics = r.panics
	return werr
}

// system is the started system as the later phases see it.
type system struct {
	cl    cluster.Cluster
	sc    cluster.SentinelCluster // nil but on the sentinel system
	slots cluster.SlotCluster     // nil but on the Redis Cluster system
	// primaries follows the node that is primary where failovers change
	// it (sentinel, Redis Cluster); nil elsewhere.
	primaries *primarySource
	mesh      *proxy.Mesh
	// targets are the processes clients reach: the nodes, and the
	// sentinels that tell them the primary.
	targets   []cluster.Node
	fakeClock bool
}

// startSystem starts the configured system on its backend and records
// what it is in run.json.
func (r *runner) startSystem(ctx context.Context, mesh *proxy.Mesh) (*system, error) {
	cfg := r.cfg
	backend := cfg.backend()
	r.info.Backend = backend.Name()
	spec := cfg.Spec(r.dir)
	spec.Processes = func(nodes []cluster.Node) error { return runfile.WriteNodes(r.dir, nodes) }
	if cfg.system().internalLinks {
		// The local backend routes the cluster's own traffic through these
		// in-process links. The container backends ignore spec.Mesh (their
		// processes cannot reach the host's loopback proxies) and carry
		// that traffic through a toxiproxy server of their own instead,
		// which the nemesis cuts through nemesis.InternalNet.
		spec.Mesh = cluster.MeshFunc(func(from, to, upstream string) (string, error) {
			l, err := mesh.Add(from, to, upstream, "")
			if err != nil {
				return "", err
			}
			return l.Addr(), nil
		})
	}
	r.say("starting %s system (%s backend) in %s", cfg.System, backend.Name(), r.dir)
	cl, err := backend.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start the %s system: %w", cfg.System, err)
	}
	sys := &system{cl: cl, mesh: mesh, targets: cl.Nodes(), fakeClock: spec.FakeClock}
	// Only the sentinel system has sentinels, whatever methods the
	// backend's cluster type has.
	if cfg.system().sentinels {
		if sys.sc, _ = cl.(cluster.SentinelCluster); sys.sc == nil {
			cl.Close(context.Background())
			return nil, fmt.Errorf("the %s backend does not run Sentinel", backend.Name())
		}
		sys.targets = append(sys.targets, sys.sc.Sentinels()...)
		sys.primaries = &primarySource{who: "the sentinels", what: "primary", primary: sys.sc.Primary, healthy: sys.sc.WaitHealthy}
	}
	if cfg.system().slots {
		if sys.slots, _ = cl.(cluster.SlotCluster); sys.slots == nil {
			cl.Close(context.Background())
			return nil, fmt.Errorf("the %s backend does not run Redis Cluster", backend.Name())
		}
		key := lockKey(0)
		sys.primaries = &primarySource{who: "the cluster's nodes", what: "primary of " + key + "'s slot", key: key,
			primary: func(ctx context.Context) (string, error) { return sys.slots.PrimaryOf(ctx, key) },
			healthy: sys.slots.WaitHealthy}
	}
	if err := checkAddresses(cl, sys.sc, cfg.AllowRemote); err != nil {
		cl.Close(context.Background())
		return nil, &UsageError{err}
	}
	r.info.Nodes, r.info.Resource = sys.targets, cl.Resource()
	cfg.system().version(ctx, cl.Nodes()[0].Addr, r.info)
	return sys, nil
}

// addClientLinks gives every client its own link to every node and
// sentinel when a fault of the run acts on links, so that a fault can cut
// one client's link and not another's. Without such faults clients dial
// directly: the proxies cost CPU that the server under test should have.
func (r *runner) addClientLinks(sys *system) error {
	if !r.cfg.needsProxies() {
		return nil
	}
	for w := 0; w < r.cfg.Clients; w++ {
		for _, n := range sys.targets {
			if _, err := sys.mesh.Add(nemesis.ClientLinkName(w), n.Name, n.Addr, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

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
			RenewMode: cfg.renewMode(), RenewTTLs: cfg.renewTTLs(),
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
	if cfg.system().askHolder {
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
	}
	// The backend's own internal network (containers), for isolate and
	// internal faults on nodes without a "net" link in the mesh.
	nenv.Internal, _ = sys.cl.(nemesis.InternalNet)
	nenv.Pauser, _ = sys.cl.(cluster.Pauser)
	nenv.Killer, _ = sys.cl.(cluster.Killer)
	nenv.Clock, _ = sys.cl.(cluster.ClockSetter)
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
	clientFaults := nemesis.NewClientFaults(rec, cfg.TTL)
	clientFaults.Mesh = sys.mesh // a pause freezes the client's own links, if it has some
	cp.env.Hooks = clientFaults
	jump, _ := cfg.ClockJumpDuration() // validated
	sched, err := nemesis.NewSchedule(nenv, cfg.Nemesis, nemesis.Options{
		Interval: cfg.NemesisInterval, Duration: cfg.FaultDuration, Targets: cfg.Targets,
		RestartDelay: cfg.RestartDelay, LoseUnsynced: cfg.LoseUnsynced, ClockJump: jump, AfterGrant: cfg.AfterAcquire,
		ClockRate: cfg.ClockRate, Latency: cfg.Latency, Jitter: cfg.Jitter, BandwidthKB: cfg.Bandwidth,
	}, rand.New(rand.NewSource(cfg.Seed)), cfg.steps(), clientFaults)
	if err != nil {
		return nil, &UsageError{err}
	}
	fp.sched = sched
	return fp, nil
}

// runPhases runs the fault phase and then the recovery phase: the clients
// throughout, the nemesis during the first. It returns the workload's
// error and the nemesis's failure to heal.
func (r *runner) runPhases(ctx context.Context, rec *history.Recorder, sys *system, cp *clientPhase, fp *faultPhase) (werr, healErr error) {
	cfg := r.cfg
	// The clients' locks are built before the clock starts (see
	// workloads.Connect); a client that cannot start fails the run here.
	clients, werr := workloads.Connect(cp.wcfg, cp.env, cfg.Clients)
	if werr != nil {
		r.mu.Lock()
		r.info.Errors = append(r.info.Errors, r.clientErrs...)
		r.mu.Unlock()
		return werr, nil
	}
	// stopCtx ends the fault and client phases early: an interrupt, a
	// failed history write, or the first violation when asked to stop
	// there.
	stopCtx, stopEarly := context.WithCancel(ctx)
	defer stopEarly()
	r.mu.Lock()
	r.stopRun = stopEarly
	failedEarly := len(r.clientErrs) > 0 // a client failed while the clients started
	r.mu.Unlock()
	if failedEarly {
		stopEarly()
	}
	if cfg.StopOnFirstViolation {
		defer r.stopOnFirstViolation(rec, stopEarly)()
	}
	fp.sched.Interrupt = stopCtx
	// The clients stop Recovery after the faults are healed, not at
	// TimeLimit+Recovery: a heal that waits out a restart on a loaded
	// machine would otherwise eat the recovery phase, and liveness after
	// the faults be judged on what was left of it (a CI run's key looked
	// stuck when its server came back 0.6 s before the end).
	runCtx, stopClients := context.WithCancel(stopCtx)
	defer stopClients()
	faultCtx, stopFaults := context.WithTimeout(stopCtx, cfg.TimeLimit)
	defer stopFaults()
	r.noteFaultsEnded(faultCtx)
	r.setPhase(PhaseFaults)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		played := r.recordSchedule(rec, fp.sched)
		healErr = fp.sched.Run(faultCtx)
		if err := played(); err != nil {
			r.mu.Lock()
			r.info.Errors = append(r.info.Errors, err.Error())
			r.mu.Unlock()
		}
		if stopCtx.Err() != nil {
			return // stopped early: no recovery phase
		}
		r.setPhase(PhaseRecovery)
		if len(fp.sched.Faults) > 0 {
			r.say("faults healed; recovery phase of %s", cfg.Recovery)
		}
		ctxsleep.Sleep(runCtx, cfg.Recovery)
		stopClients()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.progress(runCtx, rec)
	}()
	if fp.monitor != nil {
		wg.Add(2)
		go func() {
			defer wg.Done()
			fp.monitor.run(runCtx)
		}()
		go func() {
			defer wg.Done()
			r.awaitHealthy(ctx, faultCtx, runCtx, sys.primaries)
		}()
	}
	finishCheckpoints := r.startCheckpoints(runCtx, rec)
	r.say("running %d clients for %s (+%s recovery), lock %s, workload %s, nemesis %s, seed %d",
		cfg.Clients, cfg.TimeLimit, cfg.Recovery, lockName(cfg), cfg.Workload, nemesisName(cfg), cfg.Seed)
	werr = clients.Run(runCtx)
	stopFaults()
	r.mu.Lock()
	stopped := r.info.StoppedEarly
	r.mu.Unlock()
	if stopped != "" {
		r.say("%s", stopped)
	}
	stopClients()
	finishCheckpoints()
	wg.Wait()
	if fp.monitor != nil {
		r.info.Failovers = fp.monitor.failovers()
	}
	if r.healthErr != nil {
		r.info.Errors = append(r.info.Errors, r.healthErr.Error())
	}
	r.mu.Lock()
	r.info.Errors = append(r.info.Errors, r.clientErrs...)
	r.stopRun = nil
	r.mu.Unlock()
	return werr, healErr
}

// awaitHealthy waits, once the faults are healed, for the Sentinel
// topology to settle: clients run on through the recovery phase, and a
// topology that never settles makes the recovery tell nothing.
func (r *runner) awaitHealthy(ctx, faultCtx, runCtx context.Context, ps *primarySource) {
	select {
	case <-faultCtx.Done():
	case <-runCtx.Done():
		return
	}
	hctx, cancel := context.WithTimeout(runCtx, 60*time.Second)
	defer cancel()
	if err := ps.healthy(hctx); err != nil && ctx.Err() == nil && runCtx.Err() == nil {
		r.mu.Lock()
		r.healthErr = fmt.Errorf("the %s system did not become healthy after healing: %w", r.cfg.System, err)
		r.mu.Unlock()
	}
}

// stopOnFirstViolation watches the history as it is recorded and ends the
// run's fault and client phases at the first overlap of two believed
// holds or the first damage to the protected resource (firstStop). With
// StopGrace, after an overlap, it goes on until the earlier holder's hold
// has ended, so that what it did while it still believed (a stale write a
// fenced resource refused) is in the history, or StopGrace after the
// overlap, whichever comes first: a wall-clock grace alone cut a loaded
// CI run off before the woken holder wrote. The checkers then judge the
// whole history as usual. The returned function disarms a grace timer
// still pending.
func (r *runner) stopOnFirstViolation(rec *history.Recorder, stop context.CancelFunc) (disarm func()) {
	fs := newFirstStop(r.cfg.StopGrace > 0)
	var grace *time.Timer
	rec.Observe(func(op history.Op) {
		act, by, why := fs.observe(op)
		if by != "" {
			r.mu.Lock()
			r.info.StoppedEarly, r.info.StoppedBy = why, by
			r.mu.Unlock()
		}
		switch act {
		case stopNow:
			stop() // cancelling records nothing: safe under the recorder's lock
		case startGrace:
			r.mu.Lock()
			grace = time.AfterFunc(r.cfg.StopGrace, stop)
			r.mu.Unlock()
		}
	})
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if grace != nil {
			grace.Stop()
		}
	}
}

// checkAddresses refuses to let clients dial anything but loopback unless
// the user allowed remote nodes: a test's traffic must not leave the
// machine by mistake (a stale compose file, a typo in a topology file).
func checkAddresses(cl cluster.Cluster, sc cluster.SentinelCluster, allowRemote bool) error {
	if allowRemote {
		return nil
	}
	nodes := cl.Nodes()
	if res := cl.Resource(); res != nil {
		nodes = append(nodes, *res)
	}
	if sc != nil {
		nodes = append(nodes, sc.Sentinels()...)
	}
	for _, n := range nodes {
		host, _, err := net.SplitHostPort(n.Addr)
		if err != nil {
			return fmt.Errorf("node %s has no host:port address (%q): %w", n.Name, n.Addr, err)
		}
		ip := net.ParseIP(host)
		if host == "localhost" || (ip != nil && ip.IsLoopback()) {
			continue
		}
		return fmt.Errorf("refusing to dial node %s at %s: only loopback addresses are dialed unless remote nodes are allowed (Config.AllowRemote)", n.Name, n.Addr)
	}
	return nil
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

// lockerFactory gives each client process one connection per node, through
// its worker's links when there are any (a crashed client's replacement
// reuses the worker's links).
func (r *runner) lockerFactory(mesh *proxy.Mesh, nodes []cluster.Node) workloads.LockerFactory {
	return func(process int) (locks.Locker, io.Closer, error) {
		var conns []locks.Conn
		var closers closeAll
		for _, n := range nodes {
			addr := n.Addr
			if link := mesh.Find(nemesis.ClientLinkName(process%r.cfg.Clients), n.Name); link != nil {
				addr = link.Addr()
			}
			if r.cfg.system().addressesOnly {
				// The lock makes its own client from the addresses.
				conns = append(conns, locks.Conn{Name: n.Name, Addr: addr})
				continue
			}
			rdb := redis.NewClient(r.clientOptions(addr, 2))
			rdb.AddHook(workloads.SendHook{})
			closers = append(closers, rdb)
			conns = append(conns, locks.Conn{Name: n.Name, Client: rdb, Addr: addr})
		}
		l, err := r.newLock(conns, process)
		if err != nil {
			closers.Close()
			return nil, nil, err
		}
		if c, ok := l.(io.Closer); ok {
			closers = append(closers, c)
		}
		return l, closers, nil
	}
}

// closeAll closes several connections as one.
type closeAll []io.Closer

func (c closeAll) Close() error {
	var errs []error
	for _, x := range c {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}

func (r *runner) progress(ctx context.Context, rec *history.Recorder) {
	ctxsleep.Every(ctx.Done(), 5*time.Second, func() {
		elapsed := time.Duration(rec.Now()).Round(time.Second)
		r.say("[%s/%s] %d events recorded", elapsed, (r.cfg.TimeLimit + r.cfg.Recovery).Round(time.Second), rec.Count())
	})
}

// needsProxies reports whether a fault of the run needs clients to dial
// through proxies; the faults' descriptors decide.
func (c *Config) needsProxies() bool {
	names := append([]string(nil), c.Nemesis...)
	for _, st := range c.steps() {
		names = append(names, st.Action.Fault)
	}
	return nemesis.NeedsLinks(names, c.system().clientFaultsNeedLinks)
}

func (c *Config) needsFakeClock() bool {
	if nemesis.NeedsFakeClock(c.Nemesis) {
		return true
	}
	for _, st := range c.steps() {
		if nemesis.NeedsFakeClock([]string{st.Action.Fault}) {
			return true
		}
	}
	return false
}

func lockName(cfg Config) string { return cfg.LockLabel() }

func nemesisName(cfg Config) string {
	switch {
	case cfg.ScriptName != "":
		return "script " + cfg.ScriptName
	case len(cfg.Script) > 0:
		return "a script of " + strconv.Itoa(len(cfg.Script)) + " steps"
	}
	if len(cfg.Nemesis) == 0 {
		return "none"
	}
	return strings.Join(cfg.Nemesis, ",")
}
