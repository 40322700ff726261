package review

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/workloads"
)

func threatNamesOf(p *Plan) []string {
	var out []string
	for _, t := range p.Threats {
		out = append(out, t.Name)
	}
	return out
}

// Each system faces its own threats: failover and split brain only on
// Sentinel.
func TestPlanThreatsPerSystem(t *testing.T) {
	cases := []struct {
		system, lock string
		has, lacks   []string
		client       []string
	}{
		{cluster.Single, locks.Token, []string{"client-pause", "server-restart", "clock-jump", "clock-offset"}, []string{"failover", "split-brain", "client-clock"}, nil},
		{cluster.Sentinel, locks.Token, []string{"client-pause", "failover", "split-brain", "clock-offset"}, []string{"client-clock"}, nil},
		{cluster.Redlock, locks.RedlockName, []string{"server-restart", "clock-jump", "clock-offset"}, []string{"failover"}, nil},
		{cluster.RedisCluster, locks.Token, []string{"client-pause", "server-restart", "failover", "split-brain", "clock-offset"}, []string{"clock-jump"}, nil},
		// A protocol client's clock can be moved: the client-clock threat
		// runs beside clock-offset.
		{cluster.Single, "", []string{"client-clock", "clock-offset"}, nil, []string{"/usr/bin/python3", "../examples/review/token_lock.py"}},
	}
	for _, c := range cases {
		t.Run(c.system, func(t *testing.T) {
			p, err := NewPlan(Options{System: c.system, Lock: c.lock, Client: c.client, Budget: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			names := threatNamesOf(p)
			if slices.Contains(c.lacks, "client-clock") && !strings.Contains(p.NotTried["client clock"], "clock-offset") {
				t.Errorf("client-clock not tried for a Go lock says %q, want what stands in for it", p.NotTried["client clock"])
			}
			for _, n := range c.has {
				if !slices.Contains(names, n) {
					t.Errorf("%v lacks %s", names, n)
				}
			}
			for _, n := range c.lacks {
				if slices.Contains(names, n) {
					t.Errorf("%v has %s", names, n)
				}
			}
			if p.Seeds < minSeeds || p.Seeds > maxSeeds || p.Estimate <= 0 || p.Estimate > time.Hour {
				t.Errorf("seeds %d, estimate %s", p.Seeds, p.Estimate)
			}
		})
	}
}

// A budget that cannot fit the review is refused before anything runs,
// naming what it would skip and a budget that fits.
func TestPlanRefusesASmallBudget(t *testing.T) {
	_, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Budget: 30 * time.Second})
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("got %v, want a BudgetError", err)
	}
	if be.Seeds != minSeeds || len(be.WouldSkip) == 0 || suggest(be.Needs) < be.Needs {
		t.Fatalf("%+v", be)
	}
	for _, want := range []string{"cannot fit", "server-restart", "--budget"} {
		if !strings.Contains(be.Error(), want) {
			t.Errorf("%q lacks %q", be.Error(), want)
		}
	}
	p, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Budget: suggest(be.Needs)})
	if err != nil || p.Seeds != minSeeds {
		t.Fatalf("the suggested budget: %v, %+v", err, p)
	}
}

func TestPlanUsageErrors(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{System: cluster.Single, Lock: locks.Token, Budget: time.Hour, Threats: []string{"meteor"}}, "unknown threat"},
		{Options{System: cluster.Single, Lock: locks.Token, Budget: time.Hour, Threats: []string{"failover"}}, "does not apply"},
		{Options{System: cluster.Single, Lock: locks.Token, Budget: time.Hour, Mitigations: []string{"prayer"}}, "unknown mitigation"},
		{Options{System: cluster.Single, Lock: locks.Token}, "budget"},
		{Options{System: cluster.Single, Lock: locks.RedlockName, Budget: time.Hour}, "redlock"},
	}
	for _, c := range cases {
		if _, err := NewPlan(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// Each mitigation changes what it says, on top of the threat, or says why
// it does not apply.
func TestMitigationConfigs(t *testing.T) {
	p, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Budget: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	restart, _ := LookupThreat("server-restart")
	cases := []struct {
		mitigation string
		check      func(c harness.Config) bool
	}{
		{"fencing", func(c harness.Config) bool { return c.Lock == locks.Fenced && c.Workload == workloads.Counter }},
		{"fsync-always", func(c harness.Config) bool { return c.Persistence == cluster.PersistAlways }},
		{"delayed-restart", func(c harness.Config) bool { return c.RestartDelay > c.TTL }},
		{"redlock", func(c harness.Config) bool {
			return c.System == cluster.Redlock && c.Lock == locks.RedlockName && slices.Equal(c.Nemesis, []string{"kill"}) && c.Targets == "holder"
		}},
	}
	for _, c := range cases {
		m, _ := LookupMitigation(c.mitigation)
		cfg, _, err := p.mitigationConfig(restart, m, 1, Measured{})
		if err != nil || !c.check(cfg) || cfg.Seed != 1 || !slices.Contains(cfg.Nemesis, "kill") {
			t.Errorf("%s: %v\n%+v", c.mitigation, err, cfg.Settings)
		}
	}
	for _, name := range []string{"wait", "min-replicas", "ttl-below-failover"} {
		m, _ := LookupMitigation(name)
		var na *NotApplicable
		if _, _, err := p.mitigationConfig(restart, m, 1, Measured{}); !errors.As(err, &na) {
			t.Errorf("%s on a single Redis: %v, want not applicable", name, err)
		}
	}
	// A measured failover sizes the TTL.
	s, err := NewPlan(Options{System: cluster.Sentinel, Lock: locks.Token, Budget: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	failover, _ := LookupThreat("failover")
	m, _ := LookupMitigation("ttl-below-failover")
	cfg, note, err := s.mitigationConfig(failover, m, 1, Measured{Failover: 2400 * time.Millisecond})
	if err != nil || cfg.TTL != 1200*time.Millisecond || !strings.Contains(note, "2.4s") {
		t.Errorf("ttl-below-failover: %v, TTL %s, %q", err, cfg.TTL, note)
	}
	wait, _ := LookupMitigation("wait")
	if cfg, _, err := s.mitigationConfig(failover, wait, 1, Measured{}); err != nil || cfg.Lock != locks.WaitName {
		t.Errorf("wait on Sentinel: %v, lock %s", err, cfg.Lock)
	}
	fcfg, err := s.threatConfig(failover, 1)
	if err != nil || fcfg.TTL < FailoverTTL || fcfg.ScriptName == "" {
		t.Errorf("failover: %v, %+v", err, fcfg.Settings)
	}
	// On Redis Cluster: its own scripts, a longer lease, and the
	// replication mitigations apply.
	rc, err := NewPlan(Options{System: cluster.RedisCluster, Lock: locks.Token, Budget: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	split, _ := LookupThreat("split-brain")
	for _, tc := range []struct {
		th     Threat
		script string
	}{{failover, "cluster-kill-after-acquire"}, {split, "cluster-isolate-primary"}} {
		th, script := tc.th, tc.script
		cfg, err := rc.threatConfig(th, 1)
		if err != nil || cfg.ScriptName != script || cfg.TTL < ClusterFailoverTTL || cfg.Validate() != nil {
			t.Errorf("%s on Redis Cluster: %v, %v, %+v", th.Name, err, cfg.Validate(), cfg.Settings)
		}
	}
	mr, _ := LookupMitigation("min-replicas")
	if cfg, _, err := rc.mitigationConfig(failover, mr, 1, Measured{}); err != nil || cfg.MinReplicasToWrite != 1 || cfg.Validate() != nil {
		t.Errorf("min-replicas on Redis Cluster: %v, %+v", err, cfg.Settings)
	}
	// A client cannot be given the harness's fence.
	c, err := NewPlan(Options{System: cluster.Single, Client: []string{"python3", "client.py"}, Budget: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fencing, _ := LookupMitigation("fencing")
	var na *NotApplicable
	if _, _, err := c.mitigationConfig(restart, fencing, 1, Measured{}); !errors.As(err, &na) || !strings.Contains(na.Why, "client") {
		t.Errorf("fencing a client: %v", err)
	}
}

// A failover threat's run as deployed on a system that fails over goes its
// whole time, so that what the lock does after the failover's overlap is
// judged too; every other threat's run, and every mitigation's, stops at
// its first overlap, and its reproducing command says so.
func TestFailoverThreatsRunTheirTime(t *testing.T) {
	cases := []struct {
		system, threat string
		fullTime       bool
	}{
		{cluster.Sentinel, "split-brain", true},
		{cluster.Sentinel, "failover", true},
		{cluster.RedisCluster, "split-brain", true},
		{cluster.RedisCluster, "failover", true},
		{cluster.Sentinel, "client-pause", false},
		{cluster.Sentinel, "server-crash", false},
		{cluster.Single, "server-restart", false},
	}
	for _, c := range cases {
		p, err := NewPlan(Options{System: c.system, Lock: locks.Token, Budget: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		th, _ := LookupThreat(c.threat)
		cfg, err := p.threatConfig(th, 1)
		if err != nil {
			t.Fatalf("%s on %s: %v", c.threat, c.system, err)
		}
		stops := slices.Contains(cfg.Command, "--stop-on-first-violation=true")
		if cfg.StopOnFirstViolation == c.fullTime || stops == c.fullTime {
			t.Errorf("%s on %s: stops at its first overlap %v (its command: %v), want %v", c.threat, c.system, cfg.StopOnFirstViolation, stops, !c.fullTime)
		}
	}
	p, _ := NewPlan(Options{System: cluster.Sentinel, Lock: locks.Token, Budget: time.Hour})
	split, _ := LookupThreat("split-brain")
	mr, _ := LookupMitigation("min-replicas")
	if cfg, _, err := p.mitigationConfig(split, mr, 1, Measured{}); err != nil || !cfg.StopOnFirstViolation {
		t.Errorf("split-brain with min-replicas: %v, stops at its first overlap %v, want true", err, cfg.StopOnFirstViolation)
	}
}

// A cell is unsafe when any seed broke the lock; a resource mitigation's
// cell when any seed damaged the resource, whatever the lock did.
func TestJudge(t *testing.T) {
	safe, unsafe, stuck, unknown := checker.VerdictSafe, checker.VerdictUnsafe, checker.VerdictStuck, checker.VerdictUnknown
	cases := []struct {
		name       string
		runs       []RunRef
		onResource bool
		want       string
	}{
		{"all safe", []RunRef{{Verdict: safe}, {Verdict: safe}}, false, StateNotFound},
		{"one unsafe seed", []RunRef{{Verdict: safe}, {Verdict: unsafe}}, false, StateUnsafe},
		{"stuck", []RunRef{{Verdict: stuck}, {Verdict: safe}}, false, StateStuck},
		{"unsafe beats stuck", []RunRef{{Verdict: stuck}, {Verdict: unsafe}}, false, StateUnsafe},
		{"nothing granted", []RunRef{{Verdict: unknown}, {Verdict: unknown}}, false, StateUnknown},
		{"a harness failure", []RunRef{{Verdict: unsafe}, {Verdict: StateError, Error: "boom"}}, false, StateError},
		{"fencing: the lock overlapped, the resource held", []RunRef{{Verdict: unsafe, ResourceSafe: true, Violations: 3}}, true, StateNotFound},
		{"fencing: the resource was damaged", []RunRef{{Verdict: unsafe, ResourceSafe: true}, {Verdict: unsafe}}, true, StateUnsafe},
	}
	for _, c := range cases {
		if got := judge(c.runs, c.onResource); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// A budget that fits the review only without the mitigations that
// replace the lock (Redlock) names them as what else could serve instead
// of refusing; a larger one runs them.
func TestPlanDropsLockSwapsToFitTheBudget(t *testing.T) {
	runsRedlock := func(p *Plan) bool {
		for _, ms := range p.Tries {
			for _, m := range ms {
				if m.Name == "redlock" {
					return true
				}
			}
		}
		return false
	}
	big, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Budget: time.Hour})
	if err != nil || !runsRedlock(big) || len(big.ElseCouldServe) != 0 {
		t.Fatalf("an hour: %v, else %v", err, big.ElseCouldServe)
	}
	// What the plan needs without Redlock, at 2 seeds, with room to spare.
	need := 2 * (big.Estimate / time.Duration(big.Seeds))
	small, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Budget: need * 9 / 10})
	if err != nil || runsRedlock(small) || len(small.ElseCouldServe) == 0 || small.Estimate > need*9/10 {
		t.Fatalf("a tight budget: %v; runs redlock %v, else %v, estimate %s", err, runsRedlock(small), small.ElseCouldServe, small.Estimate)
	}
}

// The in-op threat kills client processes: a Go lock's review leaves it
// out and says why (as a lock that cannot extend leaves out renewal),
// while reply loss, which needs no process, stays; a client's review runs
// both.
func TestPlanKillsOnlyClientProcesses(t *testing.T) {
	p, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Budget: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	names := threatNamesOf(p)
	if slices.Contains(names, "in-op") || !slices.Contains(names, "reply-loss") {
		t.Errorf("a Go lock's threats %v: want reply-loss and not in-op", names)
	}
	if why := p.NotTried["in op"]; !strings.Contains(why, "--client") || !strings.Contains(why, "client crash") {
		t.Errorf("not tried: %q, want it to name --client and client crash", why)
	}
	if _, err := NewPlan(Options{System: cluster.Single, Lock: locks.Token, Threats: []string{"in-op"}, Budget: time.Hour}); err == nil {
		t.Error("a Go lock's review of in-op alone was planned")
	}
	for _, threat := range []string{"in-op", "reply-loss"} {
		tt, _ := LookupThreat(threat)
		c := harness.DefaultConfig()
		tt.Inject(&c)
		c.Client = []string{"/usr/bin/python3", "client.py"}
		if err := c.Validate(); err != nil {
			t.Errorf("%s for a client: %v", threat, err)
		}
	}
}

// An overlap with no server cause under a clock threat is the lock's:
// no control run (the harness's Go lock) is made for it, since neither
// threat's fault takes a key by itself, and a Go lock cannot take a
// client clock fault at all. Under a server crash the same cell is
// unclear, and the control decides.
func TestClockThreatsNeedNoControl(t *testing.T) {
	cell := Cell{LockState: StateUnsafe, Mechanisms: []checker.Mechanism{{Kind: checker.MechOverlap, Cause: checker.CauseNoServerCause, Count: 1}}}
	for _, c := range []struct {
		threat  string
		unclear bool
	}{{"client-clock", false}, {"clock-offset", false}, {"server-crash", true}} {
		th, ok := LookupThreat(c.threat)
		if !ok {
			t.Fatalf("no threat %s", c.threat)
		}
		if got := cell.unclear(th); got != c.unclear {
			t.Errorf("%s: unclear = %v, want %v", c.threat, got, c.unclear)
		}
	}
}

// A client reviewed on Redlock's independent nodes is a Redlock: the page
// does not offer Redlock as what else could serve, as it does a client
// on one Redis.
func TestRedlockIsNotOfferedToARedlock(t *testing.T) {
	offer := "Redlock over 5 independent nodes instead of one"
	for _, c := range []struct {
		system  string
		offered bool
	}{{cluster.Single, true}, {cluster.Redlock, false}} {
		t.Run(c.system, func(t *testing.T) {
			p, err := NewPlan(Options{System: c.system, Client: []string{"python3", "client.py"}, Budget: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(p.ElseCouldServe, offer); got != c.offered {
				t.Fatalf("offered %v, want %v: %v", got, c.offered, p.ElseCouldServe)
			}
			for _, ms := range p.Tries {
				for _, m := range ms {
					if m.Name == "redlock" && !c.offered {
						t.Fatalf("redlock tried on %s", c.system)
					}
				}
			}
		})
	}
}
