package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

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
	Why         string `json:"why,omitempty"`
	Interrupted bool   `json:"interrupted"`
	// Incomplete says why the history may not cover the whole run: an
	// interruption, a truncated file, a run that never finished. A "safe"
	// verdict on incomplete evidence does not meet a "safe" expectation.
	Incomplete string `json:"incomplete,omitempty"`
	// Truncated says where the readable prefix of a damaged history ends.
	Truncated string `json:"truncated,omitempty"`
	// Errors are failures of the harness itself (a fault that did not heal,
	// checkers that disagree); they make the exit code 3.
	Errors []string `json:"errors,omitempty"`
	// ClientPanics are panics inside the lock under test; each was recorded
	// as an operation with an unknown outcome.
	ClientPanics []string `json:"client_panics,omitempty"`
}

// HarnessFailed reports whether the run cannot be trusted because the
// harness itself failed.
func (r *Results) HarnessFailed() bool { return len(r.Errors) > 0 }

// Check runs the checkers on the stored run in dir and (re)writes its
// results.json. A malformed history or configuration is a *UsageError
// naming the problem; a truncated history is checked on its readable prefix
// and says so.
func Check(dir string) (*Results, error) {
	histPath := filepath.Join(dir, HistoryFile)
	if st, err := os.Stat(histPath); err != nil || !st.Mode().IsRegular() {
		hint := ""
		if _, err := os.Stat(filepath.Join(dir, "latest")); err == nil {
			hint = fmt.Sprintf(" (it looks like a store: try %s)", filepath.Join(dir, "latest"))
		}
		return nil, usage("%s is not a lockjepsen run directory: it has no %s file%s", dir, HistoryFile, hint)
	}
	cfg := DefaultConfig()
	if err := readJSON(filepath.Join(dir, ConfigFile), &cfg); err != nil {
		return nil, usage("read the run's configuration: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, usage("the run's %s is invalid: %v", ConfigFile, err)
	}
	var info RunInfo
	finished := true
	if err := readJSON(filepath.Join(dir, RunInfoFile), &info); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, usage("read the run's record: %v", err)
		}
		finished = false
	}
	read, err := history.ReadFile(histPath)
	if err != nil {
		var fe *history.FormatError
		if errors.As(err, &fe) {
			return nil, &UsageError{fmt.Errorf("malformed history: %w", err)}
		}
		return nil, err
	}
	res := checker.Check(read.Ops, checker.Options{TTL: cfg.TTL, OutDir: dir})
	out := &Results{
		Results:      res,
		Test:         cfg.TestName(),
		Expect:       cfg.Expect,
		Interrupted:  info.Interrupted,
		Errors:       append([]string(nil), info.Errors...),
		ClientPanics: info.ClientPanics,
	}
	if res.Disagreement != "" {
		out.Errors = append(out.Errors, res.Disagreement)
	}
	var incomplete []string
	if info.Interrupted {
		incomplete = append(incomplete, "the run was interrupted")
	}
	if !finished {
		incomplete = append(incomplete, "the run never finished (no "+RunInfoFile+"): the harness was killed, or is still running")
	}
	if read.Truncated {
		out.Truncated = read.TruncatedAt
		incomplete = append(incomplete, "the history is truncated: "+read.TruncatedAt)
	}
	out.Incomplete = strings.Join(incomplete, "; ")
	out.MetExpectation = met(cfg.Expect, res.Verdict)
	if out.MetExpectation && cfg.Expect == ExpectSafe && out.Incomplete != "" {
		out.MetExpectation = false
		out.Why = "safe on what was recorded, but the evidence is incomplete (" + out.Incomplete + "): a safe expectation needs a whole run"
	}
	if err := writeJSON(filepath.Join(dir, ResultsFile), out); err != nil {
		return nil, err
	}
	return out, nil
}

func met(expect, verdict string) bool {
	switch expect {
	case ExpectAny:
		return true
	case ExpectSafe:
		return verdict == checker.VerdictSafe
	case ExpectUnsafe:
		return verdict == checker.VerdictUnsafe
	case ExpectStuck:
		return verdict == checker.VerdictStuck
	}
	return false
}
