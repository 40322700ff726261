package harness

import (
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// What stopped a run early (runfile.Info.StoppedBy): an overlap of two
// believed holds, a key that outlived every client that could hold it,
// or damage to the protected resource (checker.DamageLostUpdate,
// checker.DamageRefusedStale).
const (
	StopOverlap    = "overlap"
	StopNeverFrees = checker.MechNeverFrees
)

// StopExtendGrant: an ok extend with another client's grant inside it
// (checker.ExtendGrantWatcher).
const StopExtendGrant = "extend-over-grant"

// firstStop decides, event by event, where a run told to stop at its
// first violation stops: at the first overlap of two believed holds, or
// at the first damage to the protected resource, whichever shows first.
// A run whose lock looks exclusive while its data suffers (a holder that
// writes after its lease) has no overlap to stop at, and ran its whole
// time limit before. It is fed the events in the history's order, as the
// recorder stamps them or as a stored history replays them.
type firstStop struct {
	grace   bool // after an overlap, wait for the earlier hold's end
	holds   *checker.Watcher
	data    *checker.ResourceWatcher
	keys    *checker.NeverFreesWatcher
	extends *checker.ExtendGrantWatcher
	overlap *checker.WatchViolation
	done    bool
}

// stopAction is what the run does after an event.
type stopAction int

const (
	goOn       stopAction = iota
	stopNow               // stop the run's fault and client phases
	startGrace            // the first overlap, with a grace: stop at its end
)

// newFirstStop decides for a run checked with opts (checkOptions).
func newFirstStop(grace bool, opts checker.Options) *firstStop {
	return &firstStop{grace: grace, holds: checker.NewWatcherWith(opts.Faults), data: checker.NewResourceWatcher(),
		keys: checker.NewNeverFreesWatcher(opts), extends: checker.NewExtendGrantWatcher(opts)}
}

// observe takes the next event. At the first trigger it also says what
// it was (StoppedBy) and why, in words.
func (f *firstStop) observe(op history.Op) (act stopAction, by, why string) {
	if f.done {
		return goOn, "", ""
	}
	v := f.holds.Observe(op)
	if v == nil {
		// The recorder's times strictly increase, so an overlap seen
		// now cannot be undone by an end at the same instant.
		v = f.holds.Done()
	}
	d := f.data.Observe(op)
	nf := f.keys.Observe(op)
	x := f.extends.Observe(op)
	switch {
	case f.overlap != nil:
		// In the grace: the earlier holder's act, a stale write the
		// resource refused, is what it waits for; its hold's end too.
		if f.overlap.EarlierHoldEnded() || d != nil {
			f.done = true
			return stopNow, "", ""
		}
		return goOn, "", ""
	case v != nil:
		f.overlap = v
		why = fmt.Sprintf("stopped at the first violation (--stop-on-first-violation): process %d was granted %s at %s while process %d still believed it held it",
			v.Second, v.Key, time.Duration(v.At).Round(time.Millisecond), v.First)
		if f.grace {
			return startGrace, StopOverlap, why
		}
		f.done = true
		return stopNow, StopOverlap, why
	case d != nil:
		f.done = true
		return stopNow, d.Kind, "stopped at the first damage to the resource (--stop-on-first-violation): " + d.String()
	case nf != nil:
		f.done = true
		return stopNow, StopNeverFrees, "stopped at the first key that never freed (--stop-on-first-violation): " + nf.Story
	case x != nil:
		f.done = true
		return stopNow, StopExtendGrant, "stopped at the first extend with another client's grant inside it (--stop-on-first-violation): " + x.Story
	}
	return goOn, "", ""
}
