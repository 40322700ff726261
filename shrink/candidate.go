package shrink

import (
	"fmt"
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// Candidate is one run the search tries: a subset of the original's
// executed faults (possibly moved earlier and shortened), a subset of its
// clients, its keys, its fault phase and its holds.
type Candidate struct {
	Faults []runfile.ScheduledFault
	// Clients are the original's client workers kept, in order; the run
	// has len(Clients) clients, worker Clients[i] becoming worker i.
	Clients   []int
	Keys      int
	TimeLimit time.Duration
	Hold      string
}

// Size is the candidate's size in words.
func (c Candidate) Size() string {
	return fmt.Sprintf("%d faults, %d clients, %d keys, %s fault phase, holds %s",
		len(c.Faults), len(c.Clients), c.Keys, c.TimeLimit.Round(time.Millisecond), c.Hold)
}

func clone(c Candidate) Candidate {
	c.Faults = slices.Clone(c.Faults)
	c.Clients = slices.Clone(c.Clients)
	return c
}

// Script is the candidate's fault schedule for a run of len(Clients)
// clients: each fault's clients renumbered. A client fault on a client
// that is gone is dropped, and so is a network fault narrowed to clients
// that are all gone (without them it would hit every link).
func (c Candidate) Script() []nemesis.Step {
	index := map[int]int{}
	for i, w := range c.Clients {
		index[w] = i
	}
	steps := []nemesis.Step{}
	for _, f := range c.Faults {
		st := harness.ReplayStep(f)
		if len(f.Clients) > 0 {
			var kept []int
			for _, w := range f.Clients {
				if i, ok := index[w]; ok {
					kept = append(kept, i)
				}
			}
			if len(kept) == 0 {
				continue
			}
			st.Action.Clients = kept
		}
		steps = append(steps, st)
	}
	slices.SortStableFunc(steps, func(a, b nemesis.Step) int { return int(a.At - b.At) })
	return steps
}

// Apply sets cfg's clients, keys, fault phase, holds and script to the
// candidate's.
func (c Candidate) Apply(cfg *harness.Config) {
	cfg.Clients, cfg.Keys, cfg.TimeLimit, cfg.Hold = len(c.Clients), c.Keys, c.TimeLimit, c.Hold
	cfg.Script, cfg.ScriptName, cfg.Nemesis = c.Script(), "", nil
}

// Original is the candidate that is the stored run itself: its executed
// faults (those applied), all its clients, keys, fault phase and holds.
func Original(cfg harness.Config, s *runfile.Schedule) Candidate {
	c := Candidate{Keys: cfg.Keys, TimeLimit: cfg.TimeLimit, Hold: cfg.Hold}
	for _, f := range s.Faults {
		if f.Error == "" {
			c.Faults = append(c.Faults, f)
		}
	}
	slices.SortStableFunc(c.Faults, func(a, b runfile.ScheduledFault) int { return int(a.At - b.At) })
	for w := range cfg.Clients {
		c.Clients = append(c.Clients, w)
	}
	return c
}

// Signature is what a violation is, for "the same violation came back":
// each mechanism of the lock, loss of the deployment and damage of the
// use, as kind/cause (checker.Answers).
func Signature(res *checker.Results) []string {
	if res == nil || res.Answers == nil {
		return nil
	}
	var out []string
	a := res.Answers
	for _, list := range [][]checker.Mechanism{a.Mechanisms, a.Losses, a.Damage} {
		for _, m := range list {
			s := m.Kind
			if m.Cause != "" {
				s += "/" + m.Cause
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Same reports whether got shows one of want's mechanisms: a candidate
// that stops at its first violation shows one, where the original may
// have shown several.
func Same(want, got []string) bool {
	return slices.ContainsFunc(got, func(s string) bool { return slices.Contains(want, s) })
}

// shorterHold halves a hold distribution ("50ms..150ms" → "25ms..75ms",
// "10ms" → "5ms"); ok is false when it cannot get shorter.
func shorterHold(h string) (string, bool) {
	d, err := workloads.ParseDist(h)
	if err != nil {
		return "", false
	}
	switch d.Kind {
	case "uniform":
		if d.Max < 2*time.Millisecond {
			return "", false
		}
		return fmt.Sprintf("%s..%s", d.Min/2, d.Max/2), true
	case "exp":
		if d.Mean < 2*time.Millisecond {
			return "", false
		}
		return "exp:" + (d.Mean / 2).String(), true
	}
	if d.Min < 2*time.Millisecond {
		return "", false
	}
	return (d.Min / 2).String(), true
}
