package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/harnesstest"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// The renewal scenarios give their verdicts on real servers. The unsafe
// ones' mechanism: a client pause stops the watchdog with its holder, the
// paused holder has no deadline, and its key expires during the pause
// (2×TTL), so the next grant overlaps: the run stops there. The explicit
// holder wakes, fails its extend and stops. The fenced resource refuses
// every stale write.
func TestRenewalScenarios(t *testing.T) {
	redistest.RequireBinary(t)
	for _, name := range []string{"renew-explicit", "renew-explicit-client-pause", "renew-watchdog-client-pause", "renew-watchdog-fenced-counter"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, ok := scenario.Get(name)
			if !ok {
				t.Fatalf("no scenario %s", name)
			}
			cfg := s.Config()
			cfg.Store = t.TempDir()
			if cfg.Expect == harness.ExpectUnsafe {
				harnesstest.UntilViolation(&cfg)
				cfg.StopGrace = 30 * time.Second // until the stale holder wakes, tries its write and ends its hold
			}
			r := harnesstest.Run(t, cfg).Results
			summary := strings.Join(r.Summary(), "\n")
			if !r.MetExpectation {
				t.Fatalf("expected %s:\n%s", cfg.Expect, summary)
			}
			if r.Resource != nil && r.Resource.Checked && !r.Resource.Valid {
				t.Errorf("the fenced resource was damaged:\n%s", summary)
			}
			// Holds of one to five TTLs cannot last without renewal.
			if extends := r.Stats.Counts["extend"]["ok"]; cfg.Renew == "explicit" && extends < r.Exclusion.Holds {
				t.Errorf("%d ok extends for %d holds: the holders did not renew\n%s", extends, r.Exclusion.Holds, summary)
			}
		})
	}
}
