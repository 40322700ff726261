package runfile

import (
	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/serverrecord"
)

// FaultMeanings are what the run's faults mean, as the harness that ran
// it recorded them (Description.Faults); a fault recorded without a kind
// (a run.json of before faults said) is left out, for
// checker.FaultMeanings.Of to read by its name. Nil-safe.
func (info *RunInfo) FaultMeanings() checker.FaultMeanings {
	fm := checker.FaultMeanings{}
	if info == nil || info.Described == nil {
		return fm
	}
	for name, d := range info.Described.Faults {
		if d.Kind != "" {
			fm[name] = checker.FaultMeaning{Kind: d.Kind, Instant: d.Instant, Crashes: d.Crashes, FailsOver: d.FailsOver}
		}
	}
	return fm
}

// Results is results.json: the checkers' verdict plus what the run itself
// reported. It is computed from the stored files alone, so `lockjepsen check`
// reproduces it.
type Results struct {
	*checker.Results
	Test   string `json:"test"`
	Expect string `json:"expect"`
	// MetExpectation decides the exit code: 0 when true, 1 when false.
	MetExpectation bool `json:"met_expectation"`
	// Why explains MetExpectation when the verdict alone does not.
	Why string `json:"why,omitempty"`
	// Vacuous says why a safe expectation met proves little: none of the
	// dangerous moments its faults are there to produce happened (a
	// crash that never hit a node holding a live lease).
	Vacuous     string `json:"vacuous,omitempty"`
	Interrupted bool   `json:"interrupted"`
	// Incomplete says why the history may not cover the whole run: an
	// interruption, a truncated file, a run that never finished. A "safe"
	// verdict on incomplete evidence does not meet a "safe" expectation.
	Incomplete string `json:"incomplete,omitempty"`
	// Truncated says where the readable prefix of a damaged history ends.
	Truncated string `json:"truncated,omitempty"`
	// Corrupt is set when the readable prefix ends at compressed data
	// found damaged rather than at the end of the file: the events after
	// the damage were recorded but are lost.
	Corrupt bool `json:"corrupt,omitempty"`
	// Errors are failures of the harness itself (a fault that did not heal,
	// checkers that disagree); they make the exit code 3.
	Errors []string `json:"errors,omitempty"`
	// ServerRecord counts the server record's events and gaps
	// (ServerRecordFile), when the run kept one.
	ServerRecord *serverrecord.Summary `json:"server_record,omitempty"`
	// ClientPanics are panics inside the lock under test; each was recorded
	// as an operation with an unknown outcome.
	ClientPanics []string `json:"client_panics,omitempty"`
	// StoppedEarly says why the run ended before its time limit (the
	// first violation, when asked to stop there).
	StoppedEarly string `json:"stopped_early,omitempty"`
	// StoppedBy is what it stopped at (runfile.Info.StoppedBy).
	StoppedBy string `json:"stopped_by,omitempty"`
	// CheckedAlongsideRun says that the checkers ran on the events as
	// they were recorded, not on the history read back; `lockjepsen
	// check` reads it back and clears this.
	CheckedAlongsideRun bool `json:"checked_alongside_run,omitempty"`
	// NotWritten says why results.json could not be stored (a read-only
	// run directory); the results are complete all the same.
	NotWritten string `json:"-"`
}

// HarnessFailed reports whether the run cannot be trusted because the
// harness itself failed.
func (r *Results) HarnessFailed() bool { return len(r.Errors) > 0 }
