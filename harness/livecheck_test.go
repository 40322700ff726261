package harness_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// The verdict a run gives is computed alongside it, on the events as they
// are recorded; `lockjepsen check` reads the stored history back. Both
// must say the same thing about the same run, on runs that exercise every
// checker: overlapping holds, a fenced resource, dishonest releases,
// failovers.
func TestCheckAlongsideRunAgreesWithStoredHistory(t *testing.T) {
	redistest.RequireBinary(t)
	cases := []struct {
		name string
		set  func(*harness.Config)
	}{
		{"unsafe lock under client pauses", func(c *harness.Config) {
			c.Lock, c.Nemesis = locks.SetnxDel, []string{nemesis.ClientPause}
		}},
		{"fenced counter under client pauses", func(c *harness.Config) {
			c.Lock, c.Workload, c.Nemesis = locks.Fenced, "counter", []string{nemesis.ClientPause}
		}},
		{"redlock under partitions", func(c *harness.Config) {
			c.System, c.Lock, c.Nemesis = cluster.Redlock, locks.RedlockName, []string{nemesis.Partition}
		}},
		{"sentinel failover", func(c *harness.Config) {
			c.System, c.Nemesis = cluster.Sentinel, []string{nemesis.Failover}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := harnesstest.ShortConfig(t)
			cfg.TimeLimit, cfg.Recovery = 2*time.Second, time.Second
			tc.set(&cfg)
			out := harnesstest.Run(t, cfg)
			if !out.Results.CheckedAlongsideRun {
				t.Fatal("the run's results were not computed alongside it: the stored history was checked instead")
			}
			again, err := harness.CheckContext(context.Background(), out.Dir, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if again.CheckedAlongsideRun {
				t.Fatal("a check of the stored run says it ran alongside")
			}
			if got, want := comparable(t, out.Results.Results), comparable(t, again.Results); got != want {
				t.Fatalf("alongside the run:\n%s\nfrom the stored history:\n%s", got, want)
			}
			t.Logf("%s, %d operations: the same results both ways", out.Results.Verdict, out.Results.Ops)
		})
	}
}

// comparable is r as JSON without what depends on the machine's speed:
// porcupine's wall time, and its answers when a segment timed out.
func comparable(t *testing.T, r *checker.Results) string {
	t.Helper()
	c := *r
	if r.Linearizability != nil {
		lin := *r.Linearizability
		lin.Elapsed = 0
		if lin.TimedOut > 0 || lin.OverBudget > 0 {
			lin = checker.LinearizabilityResult{}
		}
		c.Linearizability = &lin
	}
	b, err := json.MarshalIndent(&c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
