package checker

import (
	"slices"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// Latency holds one operation kind's completion latencies, in ns.
type Latency struct {
	Count int   `json:"count"`
	P50   int64 `json:"p50_ns"`
	P90   int64 `json:"p90_ns"`
	P99   int64 `json:"p99_ns"`
	Max   int64 `json:"max_ns"`
}

// Stats describes a history's volume and speed.
type Stats struct {
	// Ops counts completed client operations; Pending those that never
	// completed.
	Ops     int `json:"ops"`
	Pending int `json:"pending"`
	// Counts is f -> outcome (ok, fail, info, pending) -> count.
	Counts map[string]map[string]int `json:"counts"`
	// Duration is the time of the last event, in ns.
	Duration int64 `json:"duration_ns"`
	// AcquireThroughput is ok acquires per second; OpThroughput completed
	// operations per second. Both are absent (0) for a history shorter
	// than minRated: a rate over a few ns says nothing.
	AcquireThroughput float64             `json:"acquire_throughput,omitempty"`
	OpThroughput      float64             `json:"op_throughput,omitempty"`
	NemesisEvents     int                 `json:"nemesis_events"`
	Latency           map[string]*Latency `json:"latency"`
}

// ComputeStats counts and times a history's operations.
func ComputeStats(ops []history.Op) *Stats { return scan(ops).stats() }

func (a *analysis) stats() *Stats {
	s := &Stats{Counts: map[string]map[string]int{}, Latency: map[string]*Latency{}, Duration: a.end}
	lat := map[string][]int64{}
	for _, c := range a.calls {
		f := a.ops[c.inv].F
		m := s.Counts[f]
		if m == nil {
			m = map[string]int{}
			s.Counts[f] = m
		}
		if c.comp < 0 {
			s.Pending++
			m["pending"]++
			continue
		}
		s.Ops++
		m[string(a.ops[c.comp].Type)]++
		lat[f] = append(lat[f], a.ops[c.comp].Time-a.ops[c.inv].Time)
	}
	for _, op := range a.ops {
		if op.Process == history.NemesisProcess {
			s.NemesisEvents++
		}
	}
	for f, ds := range lat {
		slices.Sort(ds)
		q := func(p float64) int64 { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		s.Latency[f] = &Latency{Count: len(ds), P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: ds[len(ds)-1]}
	}
	if s.rated() {
		secs := float64(a.end) / 1e9
		s.AcquireThroughput = float64(s.Counts[history.Acquire]["ok"]) / secs
		s.OpThroughput = float64(s.Ops) / secs
	}
	return s
}

// minRated is the shortest history whose throughput is reported.
const minRated = int64(time.Second)

func (s *Stats) rated() bool { return s.Duration >= minRated }
