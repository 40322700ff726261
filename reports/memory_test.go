package reports_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/reports"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// soakPrefix is the operations of a soak run the checkers look at.
const soakPrefix = 20_000

// soakClients is the clients of a soak run: few, trying twice a round,
// so that even the shorter run fills its lanes' pixels with holds and
// both pages are as big, which they are past that (bounded by pixels).
const soakClients = 3

// soakRun writes a run of about nOps operations as the harness stores it
// (history.jsonl.zst), streaming, so that a run ten times longer costs
// the test only time. Its results.json is the checkers' over the first
// soakPrefix operations, which hold the first 100 violations: the
// witnesses that any longer run of the same kind keeps. Only its counts
// and duration would differ, and the duration is set to the whole run's.
func soakRun(t *testing.T, dir string, nOps int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := history.CreateWriter(filepath.Join(dir, runfile.CompressedHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var prefix []history.Op
	var b []byte
	i := int64(0)
	end := genRounds(nOps, 10, soakClients, 2, func(op history.Op) {
		op.Index = i
		i++
		if len(prefix) < 2*soakPrefix {
			prefix = append(prefix, op)
		}
		b = append(history.AppendJSON(b[:0], &op), '\n')
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := harness.DefaultConfig()
	cfg.TTL = cfg.TTLOrDefault() // as a run records it
	cfg.Name, cfg.Clients, cfg.Nemesis = "soak", soakClients, []string{"pause"}
	cfg.TimeLimit, cfg.Recovery = time.Duration(end)-3*time.Second, 3*time.Second
	writeJSON(t, filepath.Join(dir, harness.ConfigFile), cfg)
	writeJSON(t, filepath.Join(dir, harness.RunInfoFile), fixtureInfo())
	r := checkWithoutPorcupine(prefix, cfg.TTL)
	res := &checker.Results{
		Exclusion:       r.Exclusion,
		Linearizability: &checker.LinearizabilityResult{Valid: checker.ValidUnknown},
		Liveness:        r.Liveness,
		Stats:           r.Stats,
		Verdict:         checker.VerdictUnsafe, Valid: checker.ValidFalse,
	}
	res.Stats.Duration = end
	writeJSON(t, filepath.Join(dir, harness.ResultsFile), &harness.Results{Results: res, Test: "soak", Expect: "any", MetExpectation: true})
}

// peakHeap is the most heap, above what was live before, that f used at
// any moment, sampled every millisecond. The collector runs often while
// it is measured, so that the peak follows what f keeps rather than the
// garbage it has not yet collected.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	var peak uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return max(peak, base) - base
}

// The report of a run ten times longer takes no more memory: what it
// keeps is bounded by the clients, the keys, the pixels, the faults and
// the stored witnesses, not by the history (an hour-long run has 18
// million events, which the report once held all at once).
func TestReportMemoryDoesNotGrowWithTheHistory(t *testing.T) {
	const small = 10_000
	peaks := map[int]uint64{}
	for _, n := range []int{small, 10 * small} {
		dir := filepath.Join(t.TempDir(), "soak", "20261129T100000.000Z")
		soakRun(t, dir, n)
		start := time.Now()
		var err error
		peaks[n] = peakHeap(func() { _, err = reports.WriteRun(dir) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d operations: report in %s, peak heap %.1f MB", n, time.Since(start).Round(time.Millisecond), float64(peaks[n])/(1<<20))
	}
	if big, limit := peaks[10*small], peaks[small]*3/2; big > limit {
		t.Errorf("the report of %d operations took %.1f MB of heap at its peak, of %d operations %.1f MB: want at most 1.5 times as much",
			10*small, float64(big)/(1<<20), small, float64(peaks[small])/(1<<20))
	}
}
