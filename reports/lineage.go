package reports

import (
	"fmt"
	"path/filepath"

	"github.com/lockjepsen/lockjepsen/runfile"
)

// lineage is where a run came from: the run it replays, and for a run
// `lockjepsen shrink` made, the heading that says how small it is.
type lineage struct {
	// Shrunk opens the page: "minimal reproduction: F faults, C clients,
	// T s; reproduced k of n".
	Shrunk  string
	Steps   []runfile.ShrinkStep
	Stopped string
	Rerun   string
	// ReplayOf is the original run's directory and Href its report,
	// relative to this one.
	ReplayOf, Href string
}

// lineageOf reads shrunk.json and run.json's replay_of; nil for a run
// that is neither a replay nor shrunk.
func lineageOf(dir string, info *runInfo) *lineage {
	l := &lineage{}
	if s, ok, err := runfile.ReadShrunk(dir); ok && err == nil {
		l.Shrunk = fmt.Sprintf("minimal reproduction: %d faults, %d clients, %.1f s; reproduced %d of %d", s.Faults, s.Clients, s.FaultPhase.Seconds(), s.Reproduced, s.Tries)
		l.Steps, l.Stopped, l.Rerun = s.Steps, s.Stopped, s.Replay
		if l.ReplayOf == "" {
			l.ReplayOf = s.Original
		}
	}
	if info != nil && info.ReplayOf != "" {
		l.ReplayOf = info.ReplayOf
	}
	if l.Shrunk == "" && l.ReplayOf == "" {
		return nil
	}
	if l.ReplayOf != "" {
		l.Href = filepath.Join(l.ReplayOf, "report.html")
		if abs, err := filepath.Abs(dir); err == nil {
			if orig, err := filepath.Abs(l.ReplayOf); err == nil {
				if rel, err := filepath.Rel(abs, filepath.Join(orig, "report.html")); err == nil {
					l.Href = rel
				}
			}
		}
	}
	return l
}
