package harness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/internal/redistest"
	"github.com/lockjepsen/lockjepsen/locks"
)

// Redlock over five independent nodes: what the Redlock issue expects of
// our implementation and of redsync.
func TestRedlockScenarios(t *testing.T) {
	redistest.RequireBinary(t)
	type tc struct {
		name    string
		edit    func(*harness.Config)
		verdict string
	}
	var cases []tc
	for _, lock := range []string{locks.RedlockName, locks.RedsyncName} {
		cases = append(cases,
			tc{lock + ": no faults is safe", func(c *harness.Config) {}, checker.VerdictSafe},
			tc{lock + ": partitions and pauses of a minority are safe", func(c *harness.Config) {
				c.Nemesis = []string{"partition", "pause"}
				c.Targets = "minority"
			}, checker.VerdictSafe},
			tc{lock + ": a kill with immediate restart of a holder's node is unsafe", func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.Hold = "150ms..400ms"
			}, checker.VerdictUnsafe},
			tc{lock + ": a restart delayed past the TTL is safe", func(c *harness.Config) {
				c.Nemesis = []string{"kill"}
				c.Targets = "holder"
				c.RestartDelay = c.TTL + 200*time.Millisecond
				c.Hold = "100ms..300ms"
			}, checker.VerdictSafe},
		)
	}
	cases = append(cases,
		tc{"redlock: a clock jump on a holder's node is unsafe", func(c *harness.Config) {
			c.Lock = locks.RedlockName
			c.Nemesis = []string{"clock-jump"}
			c.Targets = "holder"
			c.Hold = "150ms..400ms"
		}, checker.VerdictUnsafe},
		tc{"redlock: Kleppmann's clock-jump script is unsafe", func(c *harness.Config) {
			c.Lock = locks.RedlockName
			c.ScriptName = "kleppmann-clock-jump"
			c.Clients = 2
			c.Hold = "100ms..300ms"
			c.TimeLimit = 6 * time.Second
		}, checker.VerdictUnsafe},
	)
	for i, c := range cases {
		lock := locks.RedlockName
		if strings.HasPrefix(c.name, locks.RedsyncName) {
			lock = locks.RedsyncName
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := shortConfig(t)
			cfg.System, cfg.Lock = cluster.Redlock, lock
			cfg.Seed = int64(i + 1)
			// Few clients, so that the free nodes are not split among many
			// contenders; long holds and frequent faults, so that a fault
			// lands on a holder's node many times in a short run.
			cfg.Clients = 3
			cfg.NemesisInterval, cfg.FaultDuration = 150*time.Millisecond, 150*time.Millisecond
			cfg.TimeLimit = 5 * time.Second
			c.edit(&cfg)
			cfg.Expect = c.verdict
			out := runFinding(t, cfg)
			r := out.Results
			if r.Verdict != c.verdict || len(r.Errors) > 0 {
				t.Fatalf("verdict %s, want %s; errors %v:\n%s", r.Verdict, c.verdict, r.Errors, strings.Join(r.Summary(), "\n"))
			}
			requireNoServers(t, out.Dir)
			requireNoShm(t, out.Dir)
		})
	}
}

// redislock on a single Redis gets the verdicts of our token lock.
func TestRedislockMatchesToken(t *testing.T) {
	redistest.RequireBinary(t)
	for _, f := range []struct {
		nemesis []string
		verdict string
	}{
		{nil, checker.VerdictSafe},
		{[]string{"client-pause"}, checker.VerdictSafe},
		{[]string{"kill"}, checker.VerdictUnsafe},
	} {
		for _, lock := range []string{locks.Token, locks.RedislockName} {
			t.Run(lock+"/"+strings.Join(f.nemesis, ","), func(t *testing.T) {
				t.Parallel()
				cfg := shortConfig(t)
				cfg.Lock, cfg.Nemesis = lock, f.nemesis
				cfg.Hold = "100ms..300ms"
				cfg.FaultDuration = 300 * time.Millisecond
				cfg.Expect = f.verdict
				out := runFinding(t, cfg)
				if out.Results.Verdict != f.verdict {
					t.Fatalf("verdict %s, want %s", out.Results.Verdict, f.verdict)
				}
			})
		}
	}
}
