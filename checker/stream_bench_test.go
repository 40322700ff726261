package checker

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// BenchmarkStream1M is the live check's own work on a generated history of
// a million events with violations: the Stream's rules, witnesses and
// porcupine's segments, but a budget too small to start porcupine, whose
// search would otherwise be most of the time. An op is one history; its
// cpu-ns/event is this process's CPU (the collector's included), which a
// loaded machine disturbs less than the wall time.
func BenchmarkStream1M(b *testing.B) {
	ops := genHistory(1_000_000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		s := NewStream(Options{LinearizabilityBudget: time.Nanosecond})
		for j := range ops {
			s.Add(ops[j])
		}
		if r, err := s.Finish(b.Context()); err != nil || r.Verdict != VerdictUnsafe {
			b.Fatalf("%v %v", r.Summary(), err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/float64(len(ops)), "cpu-ns/event")
}

// processCPU is this process's user and system time, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkStreamStored is the live check's work on a stored run's
// history, named by LOCKJEPSEN_BENCH_HISTORY (a history.jsonl.zst; the
// benchmark is skipped without it): what the harness's check alongside a
// run of that shape costs per event, porcupine included. Keep the file
// aside and compare two builds side by side on it.
func BenchmarkStreamStored(b *testing.B) {
	path := os.Getenv("LOCKJEPSEN_BENCH_HISTORY")
	if path == "" {
		b.Skip("LOCKJEPSEN_BENCH_HISTORY names no history")
	}
	res, err := history.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	ops := res.Ops
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		s := NewStream(Options{})
		for j := range ops {
			s.Add(ops[j])
		}
		if _, err := s.Finish(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/float64(len(ops)), "cpu-ns/event")
}

// BenchmarkWatcherStored is the progress line's and
// --stop-on-first-violation's Watcher on the stored history that
// LOCKJEPSEN_BENCH_HISTORY names, fed as the recorder's observer feeds it.
func BenchmarkWatcherStored(b *testing.B) {
	path := os.Getenv("LOCKJEPSEN_BENCH_HISTORY")
	if path == "" {
		b.Skip("LOCKJEPSEN_BENCH_HISTORY names no history")
	}
	res, err := history.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		w := NewWatcher()
		for j := range res.Ops {
			w.Observe(res.Ops[j])
			w.Done()
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/float64(len(res.Ops)), "cpu-ns/event")
}
