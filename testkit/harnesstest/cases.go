package harnesstest

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
)

// Case is one row of a table of whole runs: the edit that makes its
// scenario, the verdict the run must get, and a check of what else it
// must show (nil for none). C is the check's signature, so that each
// suite's checks take what they need of the run.
type Case[C any] struct {
	Name    string
	Edit    func(*harness.Config)
	Verdict string
	Check   C
}

// RunCases runs each case once (Run), all in parallel: the configuration
// base makes for the case (it also skips the test without the binaries
// the suite needs), the case's edit, its verdict as the expectation; then
// the suite's checks of the outcome.
func RunCases[C any](t *testing.T, cases []Case[C], base func(*testing.T, Case[C]) harness.Config,
	check func(*testing.T, Case[C], *harness.Outcome)) {
	t.Parallel()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			cfg := base(t, tc)
			tc.Edit(&cfg)
			cfg.Expect = tc.Verdict
			check(t, tc, Run(t, cfg))
		})
	}
}
