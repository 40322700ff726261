package shrink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// Runner runs a candidate once, stopping at its first violation, and
// says whether the original's violation came back.
type Runner interface {
	Try(ctx context.Context, c Candidate) (Try, error)
}

// Try is one run of a candidate.
type Try struct {
	Reproduced bool
	// Dir is the stored run ("" for runners that store nothing).
	Dir string
	// ViolationAt is when the run stopped at its violation, from the
	// start of the fault phase (0: unknown).
	ViolationAt time.Duration
}

// Options bound and shape the search.
type Options struct {
	// K of N tries must reproduce for a candidate to be kept (2 of 3).
	K, N int
	// Budget bounds the search's wall time; 0 is no bound.
	Budget time.Duration
	// TTL sizes the margins kept after a violation and a fault's end.
	TTL time.Duration
	// Progress receives a line per candidate; nil is silent.
	Progress io.Writer
}

// ErrNotReproduced: the original run's violation did not come back in
// k of n tries, so there is nothing to shrink from.
var ErrNotReproduced = errors.New("the run's violation did not reproduce")

// ErrStoppedFirst: the search was interrupted, or ran out of budget,
// before the original run had been tried k of n times. Nothing was found
// to keep; the error says which stopped it.
var ErrStoppedFirst = errors.New("the search stopped before the original run's tries were done")

// Result is the smallest candidate found and how it was found.
type Result struct {
	Best Candidate
	// Dir is a stored run of Best that reproduced ("" with a fake runner).
	Dir   string
	Steps []runfile.ShrinkStep
	// Stopped says why the search ended early: budget, interrupt.
	Stopped string
	// Reproduced of Tries is Best's last measured rate.
	Reproduced, Tries int
}

type search struct {
	r        Runner
	opts     Options
	deadline time.Time
	res      *Result
	// violationAt is the latest reproducing try's stop time.
	violationAt time.Duration
	// clientsBefore is how many clients the clients stage started from.
	clientsBefore int
}

// errStop ends the search early, keeping the best so far.
var errStop = errors.New("search stopped")

// Shrink searches from orig, which must reproduce k of n, for the
// smallest candidate that still does. Interrupted (ctx done) or out of
// budget, it returns the smallest found so far, with Stopped set.
func Shrink(ctx context.Context, r Runner, orig Candidate, opts Options) (*Result, error) {
	if opts.K <= 0 || opts.N < opts.K {
		return nil, fmt.Errorf("want 1 ≤ k ≤ n tries, got %d of %d", opts.K, opts.N)
	}
	s := &search{r: r, opts: opts, res: &Result{Best: clone(orig)}}
	if opts.Budget > 0 {
		s.deadline = time.Now().Add(opts.Budget)
	}
	ok, err := s.step(ctx, "original", "the run as recorded: "+orig.Size(), orig)
	if !ok && err == nil {
		// Faults at the holder taken up at random times may have found a
		// live lease too rarely: aimed at grants, the same faults may
		// reproduce the violation where the run as recorded did not.
		ok, err = s.aim(ctx)
	}
	if errors.Is(err, errStop) {
		return nil, fmt.Errorf("%w (%s): nothing was kept", ErrStoppedFirst, s.res.Stopped)
	}
	if err != nil {
		return s.res, err
	}
	if !ok {
		return nil, fmt.Errorf("%w in %d of %d tries", ErrNotReproduced, s.opts.K, s.opts.N)
	}
	aim := func(ctx context.Context) error { _, err := s.aim(ctx); return err }
	for _, stage := range []func(context.Context) error{aim, s.faults, s.clients, s.faultsAgain, s.keys, s.cut, s.tighten, s.durations} {
		if err := stage(ctx); err != nil {
			if errors.Is(err, errStop) {
				return s.res, nil
			}
			return s.res, err
		}
	}
	return s.res, nil
}

// step tries c k of n times; kept, it becomes the best.
func (s *search) step(ctx context.Context, stage, tried string, c Candidate) (bool, error) {
	hits, tries := 0, 0
	var dir string
	var at time.Duration
	for tries < s.opts.N && hits < s.opts.K && s.opts.N-tries >= s.opts.K-hits {
		if why := s.stopped(ctx); why != "" {
			s.res.Stopped = why
			return false, errStop
		}
		t, err := s.r.Try(ctx, c)
		if err != nil {
			return false, err
		}
		if ctx.Err() != nil { // an interrupted try proves nothing
			s.res.Stopped = "interrupted"
			return false, errStop
		}
		tries++
		if t.Reproduced {
			hits++
			dir = t.Dir
			if t.ViolationAt > 0 {
				at = t.ViolationAt
			}
		}
	}
	kept := hits >= s.opts.K
	s.res.Steps = append(s.res.Steps, runfile.ShrinkStep{Stage: stage, Tried: tried, Kept: kept, Reproduced: hits, Tries: tries})
	verdict := "put back"
	if kept {
		verdict = "kept"
		s.res.Best, s.res.Dir, s.res.Reproduced, s.res.Tries = clone(c), dir, hits, tries
		if at > 0 {
			s.violationAt = at
		}
	}
	if s.opts.Progress != nil {
		fmt.Fprintf(s.opts.Progress, "shrink %-9s %s: reproduced %d of %d, %s\n", stage, tried, hits, tries, verdict)
	}
	return kept, nil
}

func (s *search) stopped(ctx context.Context) string {
	switch {
	case ctx.Err() != nil:
		return "interrupted"
	case !s.deadline.IsZero() && time.Now().After(s.deadline):
		return fmt.Sprintf("budget of %s spent", s.opts.Budget)
	}
	return ""
}

// slack is how long a candidate runs past its last fault's end: a
// violation a fault causes shows within a few TTLs of it.
func (s *search) slack() time.Duration { return max(2*time.Second, 4*s.opts.TTL) }

// aim aims every fault planned at the holder's node right after a grant,
// as --after-acquire does. Such a fault was meant for a live lease, but
// taken up at a random time it finds one only now and then: a violation
// it caused may come back in one replay of five, too rarely for delta
// debugging to tell a fault that matters from an unlucky try. Aimed, it
// strikes at a fresh lease granted by as many nodes as the one it hit
// (schedule.json's lease_nodes), on one of that lease's nodes. Like every
// step it is kept only when it reproduces, and the shrunk schedule says
// so (after_grant). It tries nothing, and says false, when no fault is
// left to aim.
func (s *search) aim(ctx context.Context) (bool, error) {
	c := clone(s.res.Best)
	n := 0
	for i, f := range c.Faults {
		if !f.AfterGrant && slices.Contains(f.Nodes, nemesis.HolderPlaceholder) {
			c.Faults[i].AfterGrant = true
			n++
		}
	}
	if n == 0 {
		return false, nil
	}
	return s.step(ctx, "aim", fmt.Sprintf("%d faults on the holder's node aimed right after a grant like the one each hit", n), c)
}

// faults is delta debugging over the schedule. A candidate's fault phase
// ends a slack after its last fault's end (or at the original's time
// limit), so that a candidate that does not reproduce costs little.
func (s *search) faults(ctx context.Context) error {
	base := s.res.Best
	if len(base.Faults) < 2 {
		return nil
	}
	_, err := DDMin(ctx, len(base.Faults), func(subset []int) (bool, error) {
		c := clone(base)
		c.Faults = nil
		for _, i := range subset {
			c.Faults = append(c.Faults, base.Faults[i])
		}
		c.TimeLimit = min(base.TimeLimit, lastEnd(c.Faults)+s.slack())
		return s.step(ctx, "faults", fmt.Sprintf("keep faults %s of %d (%s)", indexList(subset), len(base.Faults), faultNames(c.Faults)), c)
	})
	return err
}

// faultsAgain runs delta debugging over the faults once more when the
// clients stage removed clients and more than one fault is left: with
// fewer contenders a fault's violation can come back more often (the
// Redlock restart: one client fewer racing for the free nodes), so a
// fault that could not be told from an unlucky try before may be now.
func (s *search) faultsAgain(ctx context.Context) error {
	if len(s.res.Best.Faults) < 2 || s.clientsBefore == len(s.res.Best.Clients) {
		return nil
	}
	return s.faults(ctx)
}

// clients is delta debugging over the client workers.
func (s *search) clients(ctx context.Context) error {
	base := s.res.Best
	s.clientsBefore = len(base.Clients)
	if len(base.Clients) < 2 {
		return nil
	}
	_, err := DDMin(ctx, len(base.Clients), func(subset []int) (bool, error) {
		c := clone(base)
		c.Clients = nil
		for _, i := range subset {
			c.Clients = append(c.Clients, base.Clients[i])
		}
		return s.step(ctx, "clients", fmt.Sprintf("keep %d of %d clients (workers %v)", len(c.Clients), len(base.Clients), c.Clients), c)
	})
	return err
}

func (s *search) keys(ctx context.Context) error {
	if s.res.Best.Keys <= 1 {
		return nil
	}
	c := clone(s.res.Best)
	c.Keys = 1
	_, err := s.step(ctx, "keys", fmt.Sprintf("1 key instead of %d", s.res.Best.Keys), c)
	return err
}

// margin is what a cut fault phase keeps after the violation.
func (s *search) margin() time.Duration { return max(500*time.Millisecond, 2*s.opts.TTL) }

// cut ends the fault phase a margin after the latest violation, and
// drops the faults that would start after that.
func (s *search) cut(ctx context.Context) error {
	if s.violationAt <= 0 {
		return nil
	}
	c := clone(s.res.Best)
	c.TimeLimit = s.violationAt + s.margin()
	if c.TimeLimit >= s.res.Best.TimeLimit {
		return nil
	}
	c.Faults = nil
	for _, f := range s.res.Best.Faults {
		if f.At < c.TimeLimit {
			c.Faults = append(c.Faults, f)
		}
	}
	_, err := s.step(ctx, "cut", fmt.Sprintf("fault phase %s instead of %s: cut at the violation", c.TimeLimit.Round(time.Millisecond), s.res.Best.TimeLimit.Round(time.Millisecond)), c)
	return err
}

// tighten moves the faults earlier, so that the first starts soon after
// the clients, and shortens the fault phase by as much; then halves the
// margin after the violation.
func (s *search) tighten(ctx context.Context) error {
	best := s.res.Best
	if len(best.Faults) > 0 && s.violationAt > 0 {
		lead := 100 * time.Millisecond
		if shift := best.Faults[0].At - lead; shift > 100*time.Millisecond {
			c := clone(best)
			for i := range c.Faults {
				c.Faults[i].At -= shift
			}
			c.TimeLimit = max(s.violationAt-shift+s.margin(), lastStart(c.Faults)+s.margin())
			if _, err := s.step(ctx, "tighten", fmt.Sprintf("faults %s earlier, fault phase %s", shift.Round(time.Millisecond), c.TimeLimit.Round(time.Millisecond)), c); err != nil {
				return err
			}
		}
	}
	best = s.res.Best
	if s.violationAt > 0 {
		c := clone(best)
		c.TimeLimit = max(s.violationAt+s.margin()/2, lastStart(c.Faults)+s.margin()/2)
		if c.TimeLimit < best.TimeLimit {
			if _, err := s.step(ctx, "tighten", fmt.Sprintf("fault phase %s", c.TimeLimit.Round(time.Millisecond)), c); err != nil {
				return err
			}
		}
	}
	return nil
}

// durations halves the holds, then the faults' durations.
func (s *search) durations(ctx context.Context) error {
	if h, ok := shorterHold(s.res.Best.Hold); ok {
		c := clone(s.res.Best)
		c.Hold = h
		if _, err := s.step(ctx, "durations", "holds "+h+" instead of "+s.res.Best.Hold, c); err != nil {
			return err
		}
	}
	c := clone(s.res.Best)
	changed := false
	for i := range c.Faults {
		if c.Faults[i].For >= 200*time.Millisecond {
			c.Faults[i].For /= 2
			changed = true
		}
	}
	if changed {
		if _, err := s.step(ctx, "durations", "every fault half as long", c); err != nil {
			return err
		}
	}
	return nil
}

func lastEnd(fs []runfile.ScheduledFault) time.Duration {
	var end time.Duration
	for _, f := range fs {
		end = max(end, f.At+f.For)
	}
	return end
}

func lastStart(fs []runfile.ScheduledFault) time.Duration {
	var end time.Duration
	for _, f := range fs {
		end = max(end, f.At)
	}
	return end
}

func faultNames(fs []runfile.ScheduledFault) string {
	if len(fs) > 3 {
		return fmt.Sprintf("%s, %s, … %s", fs[0].Fault, fs[1].Fault, fs[len(fs)-1].Fault)
	}
	out := ""
	for i, f := range fs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s at %s", f.Fault, f.At.Round(time.Millisecond))
	}
	return out
}

// indexList prints a subset compactly: 1-based, runs as ranges.
func indexList(xs []int) string {
	out := ""
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if out != "" {
			out += ","
		}
		if j > i {
			out += fmt.Sprintf("%d-%d", xs[i]+1, xs[j]+1)
		} else {
			out += fmt.Sprintf("%d", xs[i]+1)
		}
		i = j + 1
	}
	return out
}
