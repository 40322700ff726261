package shrink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/procstate"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// ErrSafe: the run to shrink found no violation.
var ErrSafe = errors.New("nothing to shrink: the run was safe")

// HarnessRunner tries candidates as real runs of Base (the original's
// replay configuration) in Store, each stopping at its first violation.
type HarnessRunner struct {
	Base  harness.Config
	Store string
	// Want is the original's violation (Signature).
	Want []string
}

// Try runs c once.
func (h *HarnessRunner) Try(ctx context.Context, c Candidate) (Try, error) {
	cfg := h.Base
	c.Apply(&cfg)
	cfg.Store, cfg.Name = h.Store, "candidate"
	cfg.StopOnFirstViolation, cfg.StopGrace, cfg.Expect = true, 0, harness.ExpectAny
	cfg.Progress, cfg.Observer = nil, nil
	out, err := harness.Run(ctx, cfg)
	if err != nil {
		var ie *harness.InterruptedError
		if errors.As(err, &ie) {
			return Try{}, nil
		}
		return Try{}, fmt.Errorf("candidate %s: %w", c.Size(), err)
	}
	t := Try{Dir: out.Dir, Reproduced: Same(h.Want, Signature(out.Results.Results)) && !out.Results.HarnessFailed()}
	if out.Results.StoppedEarly != "" {
		if s, err := runfile.ReadSchedule(out.Dir); err == nil {
			t.ViolationAt = s.PhaseRan
		}
	}
	return t, nil
}

// Request is a `lockjepsen shrink` of one stored run.
type Request struct {
	Dir string
	// Store receives the shrunk run, under the original's name with
	// "-shrunk".
	Store string
	Options
	// FinalTries measure the shrunk run's reproduction rate at the end
	// (0: none).
	FinalTries int
	// Locker is the Go lock of a run that tested one of the user's own.
	Locker harness.LockerFactory
}

// Outcome is a finished shrink: the stored shrunk run and its record.
type Outcome struct {
	Dir    string
	Shrunk *runfile.Shrunk
}

// Run shrinks the stored run req.Dir. It refuses a safe run (ErrSafe)
// and one whose violation does not come back (ErrNotReproduced), keeping
// nothing; otherwise it stores the smallest reproducing run found, with
// shrunk.json, even when interrupted or out of budget.
func Run(ctx context.Context, req Request) (*Outcome, error) {
	start := time.Now()
	var res runfile.Results
	if err := runfile.Finished(req.Dir); err != nil {
		return nil, &harness.UsageError{Err: fmt.Errorf("shrink: %w", err)}
	}
	if err := runfile.ReadJSON(filepath.Join(req.Dir, runfile.ResultsFile), &res); err != nil {
		return nil, &harness.UsageError{Err: fmt.Errorf("shrink %s: %w", req.Dir, err)}
	}
	want := Signature(res.Results)
	if res.Results == nil || res.Verdict != checker.VerdictUnsafe || len(want) == 0 {
		return nil, ErrSafe
	}
	base, err := harness.ReplayConfig(req.Dir)
	if err != nil {
		return nil, err
	}
	if base.CustomLock && len(base.Client) == 0 && req.Locker == nil {
		return nil, &harness.UsageError{Err: fmt.Errorf("shrink %s: the run tested a Go lock of its own, which only its program can give (lockjepsentest shrinks such a run)", req.Dir)}
	}
	base.Locker = req.Locker
	sched, err := runfile.ReadSchedule(req.Dir)
	if err != nil {
		return nil, &harness.UsageError{Err: err}
	}
	if err := os.MkdirAll(req.Store, 0o755); err != nil {
		return nil, fmt.Errorf("store %s: %w", req.Store, err)
	}
	removeDeadScratch(req.Store)
	scratch, err := os.MkdirTemp(req.Store, scratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("scratch store: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := os.WriteFile(filepath.Join(scratch, harness.OwnerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("scratch store: %w", err)
	}
	req.TTL = base.TTLOrDefault()
	orig := Original(base, sched)
	r := &HarnessRunner{Base: base, Store: scratch, Want: want}
	found, err := Shrink(ctx, r, orig, req.Options)
	if err != nil {
		return nil, err
	}
	return store(ctx, req, r, found, orig, sched, start)
}

// store copies the best run into the store, measures its rate and
// writes shrunk.json.
func store(ctx context.Context, req Request, r *HarnessRunner, found *Result, orig Candidate, sched *runfile.Schedule, start time.Time) (*Outcome, error) {
	cfg := harness.Config{}
	if err := runfile.ReadJSON(filepath.Join(found.Dir, runfile.ConfigFile), &cfg); err != nil {
		return nil, fmt.Errorf("read the shrunk run: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(filepath.Dir(filepath.Clean(req.Dir))), "-shrunk") + "-shrunk"
	dir := filepath.Join(req.Store, name, time.Now().UTC().Format("20060102T150405.000Z"))
	if err := copyDir(found.Dir, dir); err != nil {
		return nil, fmt.Errorf("store the shrunk run: %w", err)
	}
	// Named as stored, so that its replays are named after it too.
	cfg.Name, cfg.Command = name, []string{"lockjepsen", "shrink", req.Dir}
	if err := runfile.WriteJSON(filepath.Join(dir, runfile.ConfigFile), cfg); err != nil {
		return nil, err
	}
	best := found.Best
	out := &runfile.Shrunk{
		Original: req.Dir, Faults: len(best.Faults), Clients: len(best.Clients), Keys: best.Keys, FaultPhase: best.TimeLimit,
		OriginalFaults: len(orig.Faults), OriginalClients: len(orig.Clients), OriginalFaultPhase: orig.TimeLimit,
		Violation: r.Want, Reproduced: found.Reproduced, Tries: found.Tries, Steps: found.Steps, Stopped: found.Stopped,
		Replay: "lockjepsen replay " + dir,
	}
	if req.FinalTries > 0 && found.Stopped == "" {
		k, err := Rate(ctx, dir, req.FinalTries, r.Want, r.Store, req.Locker, nil)
		if err == nil && ctx.Err() == nil {
			out.Reproduced, out.Tries = k, req.FinalTries
		}
	}
	out.Took = time.Since(start)
	if err := runfile.WriteJSON(filepath.Join(dir, runfile.ShrunkFile), out); err != nil {
		return nil, err
	}
	return &Outcome{Dir: dir, Shrunk: out}, nil
}

// Rate replays the run in dir n times into store and counts the replays
// that showed one of want's mechanisms (Signature). Each replay stops at
// its first violation. progress, if not nil, gets a line per replay.
func Rate(ctx context.Context, dir string, n int, want []string, store string, locker harness.LockerFactory, progress io.Writer) (int, error) {
	cfg, err := harness.ReplayConfig(dir)
	if err != nil {
		return 0, err
	}
	cfg.Locker = locker
	r := &HarnessRunner{Base: cfg, Store: store, Want: want}
	sched, err := runfile.ReadSchedule(dir)
	if err != nil {
		return 0, err
	}
	c := Original(cfg, sched)
	k := 0
	for i := range n {
		t, err := r.Try(ctx, c)
		if err != nil {
			return k, err
		}
		if ctx.Err() != nil {
			return k, ctx.Err()
		}
		if t.Reproduced {
			k++
		}
		if progress != nil {
			fmt.Fprintf(progress, "replay %d of %d: reproduced=%t (%s)\n", i+1, n, t.Reproduced, t.Dir)
		}
	}
	return k, nil
}

// copyDir copies a run directory (files and subdirectories).
func copyDir(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil // sockets, links: nothing a report reads
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// scratchPrefix names a shrink's scratch store in the store.
const scratchPrefix = ".shrink-"

// removeDeadScratch removes the scratch stores of shrinks whose process
// is gone (a killed shrink left its own for ever): those whose owner file
// names a process that no longer runs. One without an owner file, or
// whose owner runs, is left alone.
func removeDeadScratch(store string) {
	dirs, _ := filepath.Glob(filepath.Join(store, scratchPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, harness.OwnerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || procstate.Running(pid) {
			continue
		}
		os.RemoveAll(d)
	}
}
