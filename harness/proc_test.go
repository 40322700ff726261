package harness_test

import (
	"context"
	"github.com/lockjepsen/lockjepsen/harness"

	"encoding/json"
	"github.com/redis/go-redis/v9"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// nodesOf lists the PIDs recorded in a run's nodes.json.
func nodesOf(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "nodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	return pidsIn(string(b))
}

func pidsIn(nodesJSON string) []int {
	var nodes []struct {
		PID int `json:"pid"`
	}
	json.Unmarshal([]byte(nodesJSON), &nodes)
	var out []int
	for _, n := range nodes {
		out = append(out, n.PID)
	}
	return out
}

// processAlive is true for a live, non-zombie process.
func processAlive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// go-redis logs every failed dial; under faults that is noise in test output.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

// runFinding runs cfg; when the run is expected to find a violation (or a
// stuck lock) and a short run happened not to, it tries again with other
// seeds, up to three runs. Whether a fault lands on a holder in a few
// seconds is a matter of chance on a loaded machine; a safe expectation is
// never retried: one violation there is a failure.
func runFinding(t *testing.T, cfg harness.Config) *harness.Outcome {
	t.Helper()
	var out *harness.Outcome
	for attempt := 0; attempt < 3; attempt++ {
		var err error
		out, err = harness.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Expect != harness.ExpectUnsafe && cfg.Expect != harness.ExpectStuck {
			return out
		}
		if out.Results.Verdict == cfg.Expect {
			if attempt > 0 {
				t.Logf("found on attempt %d (seed %d)", attempt+1, cfg.Seed)
			}
			return out
		}
		cfg.Seed += 1000
	}
	return out
}
