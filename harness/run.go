package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
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
	if err := cfg.checkClientScript(); err != nil {
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
	r.live = startLiveCheck(ctx, rec, checkOptions(cfg, dir), cfg.LiveViolations)
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
	if res.Ops == 0 {
		// Nothing ran (interrupted while the clients started, a client
		// that never answered its handshake): the newest run worth
		// reading is still the one latest points at.
		return out, nil
	}
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
			Class: fd.Draw.Class, Label: fd.Draw.Label, LabelDetail: fd.Draw.LabelDetail,
			Kind: string(fd.Kind), Instant: fd.Instant, Crashes: fd.Crashes, FailsOver: fd.FailsOver}
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
	// startCtx ends when the run is interrupted or fails: a client slow
	// to start is given up on then, not after its start timeout.
	startCtx context.Context
	// faultsEnded is when the fault phase's time ran out or it was
	// stopped, for schedule.json.
	faultsEnded *time.Time
	// clocks are the protocol clients' offset files, when a fault of the
	// run moves their clocks; set before the clients start.
	clocks *clientClocks
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
	r.startCtx = ctx
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
	stopRecord, err := r.recordServers(ctx, rec, sys)
	if err != nil {
		return err
	}
	defer stopRecord()
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
