package shrink_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/shrink"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

func TestMain(m *testing.M) { harnesstest.Main(m) }

// The del-release run of the issue (setnx-del, client-pause, 30 s, 10
// clients) shrinks to the stalled deleter, its victim and the next
// holder at most, one or two faults and a fault phase under 3 s. Its
// violation follows from a single client pause: the paused client
// wakes past its lease and its DEL deletes whichever key is there, which
// with clients retrying every 0-2 ms is nearly always another's; the
// search keeps a candidate only when it reproduces 2 of 3 tries.
func TestShrinkDelRelease(t *testing.T) {
	redistest.RequireBinary(t)
	s, _ := scenario.Get("del-release")
	cfg := s.Config()
	cfg.Store = t.TempDir()
	// The 30 s run stops at its first violation: what follows it is cut
	// by the search anyway, and the faults and clients before it are what
	// the search must remove.
	cfg.TimeLimit, cfg.Clients, cfg.StopOnFirstViolation = 30*time.Second, 10, true
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out.Results.Verdict != checker.VerdictUnsafe {
		t.Fatalf("del-release was %s, want unsafe: the client pauses did not break the plain DEL", out.Results.Verdict)
	}
	start := time.Now()
	got, err := shrink.Run(context.Background(), shrink.Request{Dir: out.Dir, Store: cfg.Store,
		Options: shrink.Options{K: 2, N: 3, Progress: testWriter{t}}, FinalTries: 5})
	if err != nil {
		t.Fatal(err)
	}
	sh := got.Shrunk
	t.Logf("shrunk from %d faults, %d clients, %s to %d faults, %d clients, %s in %s; reproduced %d of %d",
		sh.OriginalFaults, sh.OriginalClients, sh.OriginalFaultPhase, sh.Faults, sh.Clients, sh.FaultPhase, time.Since(start).Round(time.Second), sh.Reproduced, sh.Tries)
	if sh.Clients > 3 || sh.Faults > 2 || sh.FaultPhase >= 3*time.Second {
		t.Errorf("shrunk to %d faults, %d clients, %s fault phase; want at most 2, 3 and under 3s", sh.Faults, sh.Clients, sh.FaultPhase)
	}
	if _, ok, err := runfile.ReadShrunk(got.Dir); !ok || err != nil {
		t.Errorf("no shrunk.json in %s: %v", got.Dir, err)
	}
	if info := harnesstest.ReadRunInfo(t, got.Dir); info.ReplayOf != out.Dir {
		t.Errorf("the shrunk run replays %q, want the original %q", info.ReplayOf, out.Dir)
	}
	// Nothing of the search is left in the store but the shrunk run.
	if m, _ := filepath.Glob(filepath.Join(cfg.Store, ".shrink-*")); len(m) > 0 {
		t.Errorf("the search's runs were left in the store: %v", m)
	}
}

// A safe run is refused, and nothing is stored.
func TestShrinkRefusesASafeRun(t *testing.T) {
	redistest.RequireBinary(t)
	cfg := harnesstest.ShortConfig(t)
	cfg.TimeLimit, cfg.Recovery = time.Second, 0
	out, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shrink.Run(context.Background(), shrink.Request{Dir: out.Dir, Store: cfg.Store, Options: shrink.Options{K: 2, N: 3}}); !errors.Is(err, shrink.ErrSafe) {
		t.Fatalf("shrink of a safe run: %v, want %v", err, shrink.ErrSafe)
	}
	entries, _ := os.ReadDir(cfg.Store)
	for _, e := range entries {
		if e.Name() != cfg.TestName() && e.Name() != runfile.LatestLink {
			t.Errorf("shrink left %s in the store", e.Name())
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
