package harness_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
	"github.com/lockjepsen/lockjepsen/workloads"
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
			out := harnesstest.Run(t, cfg)
			r := out.Results
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
			if cfg.Renew == workloads.RenewWatchdog {
				requireRenewerStopped(t, out)
			}
		})
	}
}

// requireRenewerStopped checks a watchdog run's history and report: the
// renewals are there, as background events; the first violation's earlier
// holder was paused when the other was granted, its key was last set (by
// its grant or its last renewal) at least a TTL before that grant, and
// the report's witness draws its renewals.
func requireRenewerStopped(t *testing.T, out *harness.Outcome) {
	t.Helper()
	r := out.Results
	if len(r.Exclusion.Violations) == 0 {
		t.Fatal("no violation")
	}
	v := r.Exclusion.Violations[0]
	ops := harnesstest.ReadHistory(t, out.Dir).Ops
	renewals, set, paused := 0, v.First.Invoke, false
	var last *history.Op
	for i := range ops {
		op := &ops[i]
		if op.Type == history.Background {
			renewals++
		}
		if op.Time >= v.Second.Start || op.Process == v.Second.Process {
			continue
		}
		switch {
		case op.Type == history.Background && op.Process == v.First.Process && op.Key == v.Key && op.Value.Outcome == history.OK:
			last, set = op, *op.Value.From
		case op.IsNemesis() && op.F == "client-pause" && slices.Contains(op.Value.Clients, v.First.Process):
			paused = op.Value.Phase == "start"
		}
	}
	if renewals == 0 {
		t.Fatal("no renewal in the history of a watchdog run")
	}
	if !paused {
		t.Fatalf("process %d was not paused when process %d was granted %s", v.First.Process, v.Second.Process, v.Key)
	}
	ttl := int64(out.Config.TTL)
	if tol := max(int64(time.Millisecond), ttl/100); set+ttl > v.Second.Start+tol {
		t.Fatalf("process %d was granted %s at %d, before its key, last set at %d, could expire", v.Second.Process, v.Key, v.Second.Start, set)
	}
	if last != nil {
		t.Logf("%d renewals; process %d's last renewal before the overlap was sent at %s, process %d was granted at %s",
			renewals, v.First.Process, time.Duration(set), v.Second.Process, time.Duration(v.Second.Start))
	}
	html, err := reports.WriteRun(out.Dir)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if last != nil && !strings.Contains(string(page), fmt.Sprintf("process %d&#39;s lock renewed %s in the background", v.First.Process, v.Key)) {
		t.Fatalf("the report draws none of process %d's renewals", v.First.Process)
	}
}
