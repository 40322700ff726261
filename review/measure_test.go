package review

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// A run's timings are read from its faults by what their descriptors
// say: a fault that keeps nodes down until a restart (kill) is measured
// as downtime, one that pauses a node (pause) is not.
func TestMeasureReadsFaultsByTheirDescriptors(t *testing.T) {
	cases := []struct {
		name  string
		fault string
		want  []string
	}{
		{"kill keeps a node down", nemesis.Kill, []string{"a crashed node was down for 300ms, shorter than the TTL of 1s"}},
		{"pause does not", nemesis.Pause, nil},
		{"an unknown fault does not", "toy-unknown", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHistory(t, filepath.Join(dir, runfile.HistoryFile), []history.Op{
				{Time: 100e6, Process: history.NemesisProcess, Type: history.Info, F: c.fault, Value: &history.Value{Phase: "start", Targets: []string{"n1"}}},
				{Index: 1, Time: 400e6, Process: history.NemesisProcess, Type: history.Info, F: c.fault, Value: &history.Value{Phase: "stop", Targets: []string{"n1"}}},
			})
			row := &Row{Configured: Cell{TTL: time.Second, Runs: []RunRef{{Dir: dir}}}}
			row.measure()
			if !slices.Equal(row.Timings, c.want) {
				t.Fatalf("timings %q, want %q", row.Timings, c.want)
			}
		})
	}
}

func writeHistory(t *testing.T, path string, ops []history.Op) {
	t.Helper()
	var b []byte
	for _, op := range ops {
		line, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
