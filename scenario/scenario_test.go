package scenario_test

import (
	"context"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

var all = flag.Bool("all", false, "run every scenario and require its verdict (also LOCKJEPSEN_SCENARIOS=all)")

func TestMain(m *testing.M) {
	locks.SilenceRedisLogs()
	os.Exit(m.Run())
}

func TestEveryScenarioIsValid(t *testing.T) {
	name := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	for _, s := range scenario.All() {
		cfg := s.Config()
		cfg.Store = t.TempDir()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if !name.MatchString(s.Name) || s.Shows == "" || len(s.Tags) == 0 {
			t.Errorf("%s: bad name, description or tags", s.Name)
		}
		switch s.Expect {
		case harness.ExpectSafe, harness.ExpectUnsafe, harness.ExpectStuck:
		default:
			t.Errorf("%s: expectation %q", s.Name, s.Expect)
		}
		if cfg.Expect != s.Expect || cfg.TestName() != s.Name {
			t.Errorf("%s: config expects %s, named %s", s.Name, cfg.Expect, cfg.TestName())
		}
		if got, ok := scenario.Get(s.Name); !ok || got.Name != s.Name {
			t.Errorf("Get(%s)", s.Name)
		}
	}
}

// The scenarios the project's design names, with their verdicts.
func TestTheDesignScenariosAreThere(t *testing.T) {
	want := map[string]string{
		"baseline": "safe", "no-ttl": "stuck", "del-release": "unsafe", "gc-pause": "unsafe", "gc-pause-fenced": "safe",
		"clock-jump": "unsafe", "crash-no-fsync": "unsafe", "crash-fsync-always": "safe", "crash-delayed-restart": "safe",
		"sentinel-split-brain": "unsafe", "sentinel-kill-after-acquire": "unsafe", "redlock-clock-jump": "unsafe",
		"redlock-restart": "unsafe", "redlock-delayed-restart": "safe", "redlock-minority": "safe",
		"kleppmann-clock-jump": "unsafe",
	}
	for n, v := range want {
		s, ok := scenario.Get(n)
		if !ok || s.Expect != v {
			t.Errorf("%s: present %v, expects %q, want %q", n, ok, s.Expect, v)
		}
	}
}

func TestSelect(t *testing.T) {
	got, err := scenario.Select("del-release, tag:clock,del-release")
	if err != nil {
		t.Fatal(err)
	}
	names := scenario.NamesOf(got)
	if strings.Join(names, ",") != "del-release,clock-jump,clock-strobe,clock-drift,redlock-clock-jump,kleppmann-clock-jump" {
		t.Fatalf("got %v", names)
	}
	for _, bad := range []string{"nope", "tag:nope", ""} {
		if _, err := scenario.Select(bad); err == nil {
			t.Errorf("Select(%q) accepted", bad)
		}
	}
}

func TestFind(t *testing.T) {
	cases := []struct {
		system, lock, workload string
		faults                 []string
		want                   string
	}{
		{"single", "setnx-del", "mutex", []string{"client-pause"}, "del-release"},
		{"single", "token", "mutex", []string{"kill"}, "crash-no-fsync"},
		{"redlock", "redlock", "mutex", []string{"pause", "partition"}, "redlock-minority"},
		{"single", "token", "mutex", nil, "baseline"},
		{"sentinel", "wait", "mutex", []string{"kill"}, ""},
	}
	for _, c := range cases {
		s, ok := scenario.Find(c.system, c.lock, c.workload, c.faults)
		if ok != (c.want != "") || s.Name != c.want {
			t.Errorf("Find(%v): %q %v, want %q", c, s.Name, ok, c.want)
		}
	}
}

// Every scenario gives its expected verdict. The harness's own tests run
// the same configurations on every CI run; this runs them through the
// registry, sequentially, with -all or LOCKJEPSEN_SCENARIOS=all (about 4
// minutes). `lockjepsen matrix --all` does the same from the command line.
func TestEveryScenarioGivesItsVerdict(t *testing.T) {
	if !*all && os.Getenv("LOCKJEPSEN_SCENARIOS") != "all" {
		t.Skip("run with -all or LOCKJEPSEN_SCENARIOS=all")
	}
	redistest.RequireBinary(t)
	for _, s := range scenario.All() {
		t.Run(s.Name, func(t *testing.T) {
			cfg := s.Config()
			cfg.Store = t.TempDir()
			if len(cfg.Client) > 0 {
				t.Chdir("..") // client scenarios name their scripts from the repository's root
			}
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r := out.Results; !r.MetExpectation || r.HarnessFailed() {
				t.Fatalf("verdict %s, want %s; errors %v:\n%s", r.Verdict, s.Expect, r.Errors, strings.Join(r.Summary(), "\n"))
			}
		})
	}
}

// TestEverySystemHasAPreset: the review and the matrix's grid find every
// system's preset here, and it sets the system and the lock it is given;
// an unknown system is an error, not a silent single Redis.
func TestEverySystemHasAPreset(t *testing.T) {
	for _, sys := range cluster.Systems {
		p, err := scenario.PresetFor(sys)
		if err != nil {
			t.Errorf("%s: %v", sys, err)
			continue
		}
		c := scenario.Base()
		p.On("some-lock")(&c)
		p.Grid(&c)
		if c.System != sys || c.Lock != "some-lock" || c.TimeLimit <= 0 {
			t.Errorf("%s: the preset gave system %q, lock %q, time limit %v", sys, c.System, c.Lock, c.TimeLimit)
		}
		failsOver := slices.Contains(harness.FailoverSystems(), sys)
		if (p.Failover != nil) != failsOver || (p.SplitBrain != nil) != failsOver {
			t.Errorf("%s: fails over by itself: %v, but has a failover variant: %v, a split-brain one: %v", sys, failsOver, p.Failover != nil, p.SplitBrain != nil)
		}
	}
	if _, err := scenario.PresetFor("nope"); err == nil {
		t.Error("an unknown system has a preset")
	}
}
