package docker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/docker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
)

// End to end: harness.Run on the docker backend, the baseline and one
// unsafe scenario of each system, with faults that go through the Docker
// API (pause, kill/restart, clock).
func TestHarnessOnDocker(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	cases := []struct {
		name    string
		edit    func(*harness.Config)
		verdict string
	}{
		{"single token baseline is safe", func(c *harness.Config) {}, checker.VerdictSafe},
		{"single token under docker pause is safe", func(c *harness.Config) {
			c.Nemesis = []string{"pause"}
		}, checker.VerdictSafe},
		{"single setnx-del with long holds is unsafe", func(c *harness.Config) {
			c.Lock = locks.SetnxDel
			c.LongHoldRate = 0.05
		}, checker.VerdictUnsafe},
		{"redlock baseline is safe", func(c *harness.Config) {
			c.System, c.Lock, c.Clients = cluster.Redlock, locks.RedlockName, 3
		}, checker.VerdictSafe},
		// Whether a clock jump lands on a holder is a matter of timing,
		// and containers under -race are slow: the verdict is checked on
		// the local backend; here the script must run and heal cleanly
		// (SetClock's effect on a key is tested in control_test.go).
		{"redlock: Kleppmann's clock-jump script runs and heals", func(c *harness.Config) {
			c.System, c.Lock, c.Clients = cluster.Redlock, locks.RedlockName, 2
			c.ScriptName = "kleppmann-clock-jump"
			c.Hold = "100ms..300ms"
			c.TimeLimit = 6 * time.Second
		}, ""},
		{"redlock kill and restart of a minority completes", func(c *harness.Config) {
			c.System, c.Lock, c.Clients = cluster.Redlock, locks.RedlockName, 3
			c.Nemesis = []string{"kill"}
			c.Targets = "minority"
			c.Persistence = cluster.PersistAlways
		}, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := harness.DefaultConfig()
			cfg.Backend = docker.Backend{}
			cfg.Store = t.TempDir()
			cfg.Seed = int64(i + 1)
			cfg.TimeLimit, cfg.Recovery = 4*time.Second, 1500*time.Millisecond
			cfg.NemesisInterval = 400 * time.Millisecond
			tc.edit(&cfg)
			cfg.Expect = tc.verdict
			if tc.verdict == "" {
				cfg.Expect = harness.ExpectAny
			}
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := out.Results
			if len(r.Errors) > 0 || (tc.verdict != "" && r.Verdict != tc.verdict) {
				t.Fatalf("verdict %s, want %s; errors %v:\n%s", r.Verdict, tc.verdict, r.Errors, strings.Join(r.Summary(), "\n"))
			}
			if r.Ops < 100 {
				t.Errorf("only %d operations", r.Ops)
			}
			var info harness.RunInfo
			b, err := os.ReadFile(filepath.Join(out.Dir, harness.RunInfoFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &info); err != nil {
				t.Fatal(err)
			}
			if info.Backend != "docker" || !strings.HasPrefix(info.RedisVersion, "7.") {
				t.Errorf("run.json: backend %q, redis %q", info.Backend, info.RedisVersion)
			}
			// Close saved each node's log into the store.
			for _, n := range info.Nodes {
				if st, err := os.Stat(n.LogPath); err != nil || st.Size() == 0 {
					t.Errorf("no log for %s at %s: %v", n.Name, n.LogPath, err)
				}
			}
		})
	}
}
