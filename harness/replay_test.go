package harness_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// ReplayTolerance bounds how far a replayed fault may start from its
// recorded offset: what the test asserts, far above what was measured
// (docs/replay.md), so that a loaded machine does not fail it while a
// replay that ignored the offsets (all at 0, or drawn anew) would.
const replayTolerance = 750 * time.Millisecond

func runAndReplay(t *testing.T, cfg harness.Config) (orig, replay string) {
	t.Helper()
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rcfg, err := harness.ReplayConfig(out.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rcfg.Name = cfg.TestName() + "-replay"
	rout, err := harness.Run(context.Background(), rcfg)
	if err != nil {
		t.Fatal(err)
	}
	if info := harnesstest.ReadRunInfo(t, rout.Dir); info.ReplayOf != out.Dir {
		t.Errorf("run.json replay_of = %q, want %q", info.ReplayOf, out.Dir)
	}
	return out.Dir, rout.Dir
}

func readSchedule(t *testing.T, dir string) *runfile.Schedule {
	t.Helper()
	s, err := runfile.ReadSchedule(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A replay applies each recorded fault at its recorded offset, on the
// same node, with the same parameters.
func TestReplayPlacesFaultsAtRecordedOffsets(t *testing.T) {
	redistest.RequireBinary(t)
	t.Parallel()
	cfg := harnesstest.ShortConfig(t)
	cfg.TimeLimit, cfg.Recovery = 3*time.Second, 0
	cfg.Nemesis = []string{"pause", "partition"}
	cfg.NemesisInterval, cfg.FaultDuration = 300*time.Millisecond, 100*time.Millisecond
	cfg.Expect = harness.ExpectAny
	orig, replay := runAndReplay(t, cfg)
	a, b := readSchedule(t, orig).Faults, readSchedule(t, replay).Faults
	// A step near the deadline may fall on either side of it.
	n := min(len(a), len(b))
	if n < 3 || len(a)-n > 1 {
		t.Fatalf("original executed %d faults, the replay %d", len(a), len(b))
	}
	var worst, worstDue time.Duration
	for i := range n {
		if a[i].Fault != b[i].Fault || !slices.Equal(a[i].Hit, b[i].Hit) || a[i].For != b[i].For {
			t.Errorf("fault %d: replayed %s on %v for %s, recorded %s on %v for %s", i, b[i].Fault, b[i].Hit, b[i].For, a[i].Fault, a[i].Hit, a[i].For)
		}
		worst = max(worst, (b[i].Applied - a[i].Applied).Abs())
		worstDue = max(worstDue, (b[i].At - a[i].At).Abs())
	}
	t.Logf("%d faults replayed; the largest gap between a recorded and a replayed start: %s (taken up: %s)", n, worst, worstDue)
	if worst > replayTolerance {
		t.Errorf("a replayed fault started %s away from its recorded offset (tolerance %s)", worst, replayTolerance)
	}
}

// A fault aimed after a grant is aimed after a grant again: each
// replayed kill waits for a grant that completes after the kill was due
// and whose acquire began before the kill landed. One client holding
// 1-1.5 s makes grants a second apart, so a kill at a clock time would
// mostly miss them.
func TestReplayAimsAfterGrantAgain(t *testing.T) {
	redistest.RequireBinary(t)
	t.Parallel()
	cfg := harnesstest.ShortConfig(t)
	cfg.TimeLimit, cfg.Recovery = 4*time.Second, 0
	cfg.Clients = 1
	cfg.Nemesis, cfg.AfterAcquire = []string{"kill"}, true
	cfg.TTL, cfg.Hold = 2*time.Second, "1s..1500ms"
	cfg.NemesisInterval = 400 * time.Millisecond
	cfg.Expect = harness.ExpectAny
	_, replay := runAndReplay(t, cfg)
	s := readSchedule(t, replay)
	if len(s.Faults) == 0 {
		t.Fatal("the replay applied no fault")
	}
	ops := harnesstest.ReadHistory(t, replay).Ops
	for i, f := range s.Faults {
		if !f.AfterGrant {
			t.Errorf("replayed fault %d is not aimed after a grant", i)
			continue
		}
		due, landed := s.PhaseStart+int64(f.At), s.PhaseStart+int64(f.Applied)
		if !grantBetween(ops, due, landed) {
			t.Errorf("replayed kill %d (due %s, landed %s) followed no grant", i, time.Duration(due), time.Duration(landed))
		}
	}
}

// A kill aimed at the holder's node right after a grant is replayed at
// the holder of the replay's own time, after a grant by as many nodes as
// the one it hit: schedule.json keeps "@holder" and lease_nodes, and each
// replayed kill hit a node of a lease of that size granted between the
// kill's due time and its landing. Three Redlock clients contending for
// five nodes get leases of three, four and five nodes.
func TestReplayAimsAtTheSameKindOfLease(t *testing.T) {
	redistest.RequireBinary(t)
	t.Parallel()
	cfg := harnesstest.ShortConfig(t)
	cfg.System, cfg.Lock, cfg.Clients = cluster.Redlock, locks.RedlockName, 3
	cfg.TimeLimit, cfg.Recovery = 4*time.Second, 0
	cfg.Nemesis, cfg.Targets, cfg.AfterAcquire = []string{"kill"}, nemesis.TargetHolder, true
	cfg.Hold, cfg.NemesisInterval = "150ms..400ms", 300*time.Millisecond
	// Patient per-node and op budgets (config.json keeps them for the
	// replay): with the default 50 ms per node and 250 ms per op, a
	// saturated CI machine answered late often enough that the replay's
	// 4 s brought no grant to aim at, and it applied none of its 6 kills
	// (ci-19, 2026-12-05). A kill waits for a grant; the budgets only
	// decide how many grants a loaded machine makes.
	cfg.NodeTimeout, cfg.OpTimeout, cfg.TTL = harnesstest.RedlockPatientNodeTimeout, time.Second, time.Second
	cfg.Expect = harness.ExpectAny
	orig, replay := runAndReplay(t, cfg)
	a, b := readSchedule(t, orig).Faults, readSchedule(t, replay)
	if len(a) == 0 || len(b.Faults) == 0 {
		t.Fatalf("the original applied %d kills on leases of %v nodes, the replay %d", len(a), leaseSizes(a), len(b.Faults))
	}
	ops := harnesstest.ReadHistory(t, replay).Ops
	t.Logf("the original applied %d kills on leases of %v nodes, the replay %d on leases of %v", len(a), leaseSizes(a), len(b.Faults), leaseSizes(b.Faults))
	for i, f := range b.Faults {
		// Each kill waits for its own kind of grant, so they may land out
		// of order: the original's is the one taken up at the same time.
		o := slices.MinFunc(a, func(x, y runfile.ScheduledFault) int { return cmp.Compare((x.At - f.At).Abs(), (y.At - f.At).Abs()) })
		if !slices.Equal(f.Nodes, []string{nemesis.HolderPlaceholder}) || !slices.Equal(o.Nodes, f.Nodes) {
			t.Errorf("kill %d planned on %v, recorded on %v; want %s", i+1, f.Nodes, o.Nodes, nemesis.HolderPlaceholder)
		}
		if o.LeaseNodes == 0 || f.LeaseNodes != o.LeaseNodes || len(f.Hit) != 1 {
			t.Errorf("kill %d hit %v of a lease of %d nodes; the original hit one of %d", i+1, f.Hit, f.LeaseNodes, o.LeaseNodes)
			continue
		}
		due, landed := b.PhaseStart+int64(f.At), b.PhaseStart+int64(f.Applied)
		if !leaseGrantedBetween(ops, due, landed, f.LeaseNodes, f.Hit[0]) {
			t.Errorf("replayed kill %d (due %s, landed %s) hit %s, which granted no lease of %d nodes in between", i+1, time.Duration(due), time.Duration(landed), f.Hit[0], f.LeaseNodes)
		}
	}
}

// leaseSizes lists how many nodes granted the lease each fault hit.
func leaseSizes(fs []runfile.ScheduledFault) []int {
	var sizes []int
	for _, f := range fs {
		sizes = append(sizes, f.LeaseNodes)
	}
	return sizes
}

// leaseGrantedBetween reports whether a lease granted by n nodes, node
// among them, completed after due and was asked for before landed.
func leaseGrantedBetween(ops []history.Op, due, landed int64, n int, node string) bool {
	return grantedBetween(ops, due, landed, func(op history.Op) bool {
		return op.Value != nil && len(op.Value.Nodes) == n && slices.Contains(op.Value.Nodes, node)
	})
}

// grantBetween reports whether an acquire invoked before landed
// completed ok after due.
func grantBetween(ops []history.Op, due, landed int64) bool {
	return grantedBetween(ops, due, landed, func(history.Op) bool { return true })
}

// grantedBetween reports whether an acquire invoked before landed
// completed ok after due with a grant that match accepts.
func grantedBetween(ops []history.Op, due, landed int64, match func(history.Op) bool) bool {
	invoked := map[int]int64{}
	for _, op := range ops {
		if op.F != history.Acquire || op.IsNemesis() {
			continue
		}
		switch op.Type {
		case history.Invoke:
			invoked[op.Process] = op.Time
		case history.OK:
			if op.Time >= due && invoked[op.Process] <= landed && match(op) {
				return true
			}
		}
	}
	return false
}
