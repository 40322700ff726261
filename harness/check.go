package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	Interrupted    bool `json:"interrupted"`
	// Truncated says where the readable prefix of a damaged history ends.
	Truncated string   `json:"truncated,omitempty"`
	Errors    []string `json:"errors,omitempty"`
}

// Check runs the checkers on the stored run in dir and (re)writes its
// results.json. A malformed history is a *UsageError naming the line; a
// truncated one is checked on its readable prefix and says so in Truncated.
func Check(dir string) (*Results, error) {
	histPath := filepath.Join(dir, HistoryFile)
	if _, err := os.Stat(histPath); err != nil {
		return nil, usage("%s is not a lockjepsen run directory: %v", dir, err)
	}
	cfg := DefaultConfig()
	if err := readJSON(filepath.Join(dir, ConfigFile), &cfg); err != nil {
		return nil, usage("read the run's configuration: %v", err)
	}
	var info RunInfo
	if err := readJSON(filepath.Join(dir, RunInfoFile), &info); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, usage("read the run's record: %v", err)
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
		Results:     res,
		Test:        cfg.TestName(),
		Expect:      cfg.Expect,
		Interrupted: info.Interrupted,
		Errors:      info.Errors,
	}
	if read.Truncated {
		out.Truncated = read.TruncatedAt
	}
	out.MetExpectation = met(cfg.Expect, res.Verdict)
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
