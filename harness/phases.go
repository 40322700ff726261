package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// runPhases runs the fault phase and then the recovery phase: the clients
// throughout, the nemesis during the first. It returns the workload's
// error and the nemesis's failure to heal.
//
// The run's parts run as one group, as etcd's robustness runScenario
// does: the nemesis and then the recovery, the progress line, and on a
// system that fails over the primary monitor and the wait for health; the
// clients run here, and the group is waited for before the results are
// read.
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
	ph := r.phaseContexts(ctx, rec)
	defer ph.cancel()
	fp.sched.Interrupt = ph.stop

	var parts sync.WaitGroup
	parts.Go(func() { healErr = r.faultsThenRecovery(ph, rec, fp) })
	parts.Go(func() { r.progress(ph.run, rec) })
	if fp.monitor != nil {
		parts.Go(func() { fp.monitor.run(ph.run) })
		parts.Go(func() { r.awaitHealthy(ctx, ph.faults, ph.run, sys.primaries) })
	}
	finishCheckpoints := r.startCheckpoints(ph.run, rec)
	r.say("running %d clients for %s (+%s recovery), lock %s, workload %s, nemesis %s, seed %d",
		cfg.Clients, cfg.TimeLimit, cfg.Recovery, lockName(cfg), cfg.Workload, nemesisName(cfg), cfg.Seed)
	werr = clients.Run(ph.run)
	ph.stopFaults()
	r.mu.Lock()
	stopped := r.info.StoppedEarly
	r.mu.Unlock()
	if stopped != "" {
		r.say("%s", stopped)
	}
	ph.stopClients()
	finishCheckpoints()
	parts.Wait()
	r.collectPhaseErrors(fp)
	return werr, healErr
}

// phaseContexts are the contexts of a run's phases, each inside the one
// before.
type phaseContexts struct {
	// stop ends the fault and client phases early: an interrupt, a failed
	// history write, or the first violation when asked to stop there.
	stop context.Context
	// run is the clients': it ends Recovery after the faults are healed,
	// not at TimeLimit+Recovery: a heal that waits out a restart on a
	// loaded machine would otherwise eat the recovery phase, and liveness
	// after the faults be judged on what was left of it (a CI run's key
	// looked stuck when its server came back 0.6 s before the end).
	run context.Context
	// faults is the nemesis's: it ends at TimeLimit.
	faults                  context.Context
	stopClients, stopFaults context.CancelFunc
	cancel                  func()
}

// phaseContexts makes the phases' contexts, arms the early stops, and
// enters the fault phase.
func (r *runner) phaseContexts(ctx context.Context, rec *history.Recorder) *phaseContexts {
	stopCtx, stopEarly := context.WithCancel(ctx)
	r.mu.Lock()
	r.stopRun = stopEarly
	failedEarly := len(r.clientErrs) > 0 // a client failed while the clients started
	r.mu.Unlock()
	if failedEarly {
		stopEarly()
	}
	disarm := func() {}
	if r.cfg.StopOnFirstViolation {
		disarm = r.stopOnFirstViolation(rec, stopEarly)
	}
	runCtx, stopClients := context.WithCancel(stopCtx)
	faultCtx, stopFaults := context.WithTimeout(stopCtx, r.cfg.TimeLimit)
	r.noteFaultsEnded(faultCtx)
	r.setPhase(PhaseFaults)
	return &phaseContexts{stop: stopCtx, run: runCtx, faults: faultCtx, stopClients: stopClients, stopFaults: stopFaults,
		cancel: func() { stopFaults(); stopClients(); disarm(); stopEarly() }}
}

// faultsThenRecovery runs the nemesis's schedule until the fault phase
// ends, records what it played, and then, unless the run was stopped
// early, the recovery phase, after which it stops the clients. It returns
// the nemesis's failure to heal.
func (r *runner) faultsThenRecovery(ph *phaseContexts, rec *history.Recorder, fp *faultPhase) error {
	played := r.recordSchedule(rec, fp.sched)
	healErr := fp.sched.Run(ph.faults)
	if err := played(); err != nil {
		r.mu.Lock()
		r.info.Errors = append(r.info.Errors, err.Error())
		r.mu.Unlock()
	}
	if ph.stop.Err() != nil {
		return healErr // stopped early: no recovery phase
	}
	r.setPhase(PhaseRecovery)
	if len(fp.sched.Faults) > 0 {
		r.say("faults healed; recovery phase of %s", r.cfg.Recovery)
	}
	ctxsleep.Sleep(ph.run, r.cfg.Recovery)
	ph.stopClients()
	return healErr
}

// collectPhaseErrors records, once the parts are done, the failovers seen
// and the errors of the health wait and the clients.
func (r *runner) collectPhaseErrors(fp *faultPhase) {
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
	fs := newFirstStop(r.cfg.StopGrace > 0, checkOptions(r.cfg, ""))
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

func (r *runner) progress(ctx context.Context, rec *history.Recorder) {
	ctxsleep.Every(ctx.Done(), 5*time.Second, func() {
		elapsed := time.Duration(rec.Now()).Round(time.Second)
		r.say("[%s/%s] %d events recorded", elapsed, (r.cfg.TimeLimit + r.cfg.Recovery).Round(time.Second), rec.Count())
	})
}
