package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// recordSchedule collects every action sched starts and returns what
// writes them to schedule.json once sched.Run has returned: the faults
// the run executed, for `lockjepsen replay` and `shrink`.
func (r *runner) recordSchedule(rec *history.Recorder, sched *nemesis.Schedule) (write func() error) {
	var mu sync.Mutex
	out := runfile.Schedule{PhaseStart: rec.Now(), Faults: []runfile.ScheduledFault{}}
	start := time.Now()
	sched.OnPlayed = func(p nemesis.Played) {
		f := ScheduledFault(p.Action, p.At)
		f.Applied, f.Hit, f.LeaseNodes = p.Applied, p.Hit, p.LeaseNodes
		if p.Err != nil {
			f.Error = p.Err.Error()
		}
		mu.Lock()
		out.Faults = append(out.Faults, f)
		mu.Unlock()
	}
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		out.PhaseRan = time.Since(start)
		r.mu.Lock()
		if r.faultsEnded != nil {
			out.PhaseRan = r.faultsEnded.Sub(start)
		}
		r.mu.Unlock()
		if err := writeJSON(filepath.Join(r.dir, runfile.ScheduleFile), out); err != nil {
			return fmt.Errorf("store the executed fault schedule: %w", err)
		}
		return nil
	}
}

// noteFaultsEnded remembers when the fault phase's time ran out or the
// run stopped early, before the heal: schedule.json's phase length.
func (r *runner) noteFaultsEnded(faultCtx context.Context) {
	context.AfterFunc(faultCtx, func() {
		t := time.Now()
		r.mu.Lock()
		r.faultsEnded = &t
		r.mu.Unlock()
	})
}

// ScheduledFault is action a, taken up at offset at, in schedule.json's
// form.
func ScheduledFault(a nemesis.Action, at time.Duration) runfile.ScheduledFault {
	return runfile.ScheduledFault{
		Fault: a.Fault, At: at, Nodes: append([]string(nil), a.Nodes...), Clients: append([]int(nil), a.Clients...),
		For: a.For, Offset: a.Offset, Rate: a.Rate, LoseUnsynced: a.LoseUnsynced, AfterGrant: a.AfterGrant, Internal: a.Internal,
		LinkLatency: a.Link.Latency, LinkJitter: a.Link.Jitter, LinkRateKBps: a.Link.RateKBps,
	}
}

// ReplayStep is the script step that plays a recorded fault again: at
// the same offset, on the same targets, aimed after a grant again if it
// was.
func ReplayStep(f runfile.ScheduledFault) nemesis.Step {
	return nemesis.Step{At: f.At, Action: nemesis.Action{
		Fault: f.Fault, Nodes: append([]string(nil), f.Nodes...), Clients: append([]int(nil), f.Clients...),
		For: f.For, Offset: f.Offset, Rate: f.Rate, LoseUnsynced: f.LoseUnsynced, AfterGrant: f.AfterGrant, LeaseNodes: f.LeaseNodes, Internal: f.Internal,
		Link: proxy.Fault{Latency: f.LinkLatency, Jitter: f.LinkJitter, RateKBps: f.LinkRateKBps},
	}}
}

// ReplaySteps are the steps of the faults of s that were applied, in
// the order of their offsets.
func ReplaySteps(s *runfile.Schedule) []nemesis.Step {
	steps := []nemesis.Step{}
	for _, f := range s.Faults {
		if f.Error != "" {
			continue // not applied: replaying it would add a fault
		}
		steps = append(steps, ReplayStep(f))
	}
	sortSteps(steps)
	return steps
}

// sortSteps orders steps by offset, stably: the script runner starts
// them in order.
func sortSteps(steps []nemesis.Step) {
	for i := 1; i < len(steps); i++ {
		for j := i; j > 0 && steps[j].At < steps[j-1].At; j-- {
			steps[j], steps[j-1] = steps[j-1], steps[j]
		}
	}
}

// ReplayConfig is the configuration that replays the stored run in dir:
// its settings, with its executed fault schedule as a script in place of
// its random schedule or named script. Store and Name are the caller's
// to set (they default to the original's). A run of a Go lock of the
// user's (CustomLock without Client) needs its Locker set again: only
// its program can give it.
func ReplayConfig(dir string) (Config, error) {
	cfg := DefaultConfig()
	if err := readJSON(filepath.Join(dir, ConfigFile), &cfg); err != nil {
		return Config{}, usage("replay %s: %v", dir, err)
	}
	s, err := runfile.ReadSchedule(dir)
	if err != nil {
		return Config{}, usage("replay %s: %v", dir, err)
	}
	cfg.Script, cfg.ScriptName, cfg.Nemesis = ReplaySteps(s), "", nil
	cfg.ReplayOf = dir
	// A replay (and each of shrink's candidates) is run to explain a
	// violation, so it keeps each node's record, whatever the original
	// run did (docs/server-record.md: what it costs).
	cfg.ServerRecord = true
	return cfg, nil
}
