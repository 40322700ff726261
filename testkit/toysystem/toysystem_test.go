// Package toysystem_test shows what adding a system takes: a descriptor,
// registered as a program that brings its own system registers it (a
// built-in one is one entry in cluster's systemList instead), and the
// backends' start code, which for independent redis-servers the local
// backend already has. Help, validation, the presets, the fault targets
// and the run all read the descriptor; nothing else names the system.
// It has a test binary of its own, so that the toy stays out of the other
// packages' lists of systems.
package toysystem_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	_ "github.com/lockjepsen/lockjepsen/cluster/local" // the backend that starts the toy
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// duo is the toy: two independent redis-servers, of which the test's lock
// uses the first.
const duo = "duo"

func init() {
	cluster.RegisterSystem(cluster.System{
		Name: duo, Title: "two independent redis-servers (a toy)", DefaultNodes: 2,
		Server: cluster.ServerRedis, ReferenceLock: locks.Token,
		CheckNodes: func(n int) error {
			if n != 2 {
				return fmt.Errorf("has exactly 2 nodes, not %d", n)
			}
			return nil
		},
	})
}

// The descriptor alone puts the toy in help, validation, the presets and
// the facts the review and the matrix ask.
func TestToySystemIsDescribedOnce(t *testing.T) {
	if !slices.Contains(cluster.Systems, duo) || !strings.Contains(harness.SystemHelp(), duo+" (two independent") {
		t.Fatalf("the toy is not listed: %v; help %q", cluster.Systems, harness.SystemHelp())
	}
	if got := harness.LockNodes(duo); got != 2 {
		t.Errorf("a lock sees %d nodes of the toy, want 2", got)
	}
	if got := harness.FaultTarget(duo); got != nemesis.TargetOne {
		t.Errorf("fault target %q, want %q", got, nemesis.TargetOne)
	}
	if p, err := scenario.PresetFor(duo); err != nil || p.Failover != nil {
		t.Errorf("preset: %v (failover variant %v)", err, p.Failover != nil)
	} else {
		c := scenario.Base()
		p.On("my-lock")(&c)
		if c.System != duo || c.Lock != "my-lock" {
			t.Errorf("the preset set system %q, lock %q", c.System, c.Lock)
		}
	}
	cases := []struct {
		name string
		edit func(*harness.Config)
		want string // "" valid
	}{
		{"default", func(*harness.Config) {}, ""},
		{"three nodes", func(c *harness.Config) { c.Nodes = 3 }, "has exactly 2 nodes, not 3"},
		{"sentinel options", func(c *harness.Config) { c.Sentinels = 3 }, "are for --system sentinel"},
		{"min-replicas", func(c *harness.Config) { c.MinReplicasToWrite = 1 }, "are for --system sentinel or cluster"},
		{"targets primary", func(c *harness.Config) { c.Nemesis, c.Targets = []string{nemesis.Kill}, nemesis.TargetPrimary }, "--targets primary needs"},
		{"a lock that does not list it", func(c *harness.Config) { c.Locker, c.CustomLock = nil, false }, "--lock token needs --system"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := toyConfig(t, locks.Token)
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !harness.IsUsage(err)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// The toy runs on real servers: the harness starts both nodes, the lock
// gets a connection to each, and the checkers pass a correct lock and
// flag a broken one.
func TestToySystemRuns(t *testing.T) {
	redistest.RequireBinary(t)
	cases := []struct {
		name, lock string
		edit       func(*harness.Config)
		verdict    string
	}{
		{"token is safe", locks.Token, func(*harness.Config) {}, checker.VerdictSafe},
		// Certain: 5% of holds outlast the 500 ms TTL, and the holder's
		// plain DEL then deletes the next holder's key; the run stops at
		// the first overlap.
		{"a DEL release is unsafe", locks.SetnxDel, func(c *harness.Config) {
			c.LongHoldRate = 0.05
			harnesstest.UntilViolation(c)
		}, checker.VerdictUnsafe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := toyConfig(t, tc.lock)
			cfg.Expect = harness.ExpectAny
			tc.edit(&cfg)
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Results.Verdict; got != tc.verdict {
				t.Errorf("verdict %s, want %s", got, tc.verdict)
			}
			var info harness.RunInfo
			if err := runfile.ReadJSON(filepath.Join(out.Dir, harness.RunInfoFile), &info); err != nil {
				t.Fatal(err)
			}
			if n := len(info.Nodes); n != 2 || info.Nodes[1].Role != cluster.RoleNode || info.RedisVersion == "" {
				t.Errorf("run.json: %d nodes %+v, redis %q; want 2 independent nodes and the version", n, info.Nodes, info.RedisVersion)
			}
		})
	}
}

// toyConfig runs lock on the toy's first node, as a lock of the user's
// own: the built-in locks list the systems they fit, and none lists the
// toy.
func toyConfig(t *testing.T, lock string) harness.Config {
	cfg := harnesstest.ShortConfig(t)
	cfg.System, cfg.CustomLock, cfg.CustomLockName = duo, true, "toy-"+lock
	cfg.Locker = func(nodes []locks.Conn, _ int) (locks.Locker, error) {
		if len(nodes) != 2 {
			return nil, fmt.Errorf("the toy's lock got %d nodes, want 2", len(nodes))
		}
		return locks.NilOnErr(locks.NewRedisLock(nodes[0].Client, lock, ""))
	}
	return cfg
}
