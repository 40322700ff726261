package harness_test

import (
	"context"

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
