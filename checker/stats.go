package checker

import (
	"math/bits"
	"time"
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
	AcquireThroughput float64 `json:"acquire_throughput,omitempty"`
	OpThroughput      float64 `json:"op_throughput,omitempty"`
	NemesisEvents     int     `json:"nemesis_events"`
	// SummarizedFailedAcquires counts the failed acquires recorded only as
	// summaries (--record-failed-acquires=summary): they are in Ops and
	// Counts, not in Latency, and porcupine did not see them.
	SummarizedFailedAcquires int                 `json:"summarized_failed_acquires,omitempty"`
	Latency                  map[string]*Latency `json:"latency"`
}

// minRated is the shortest history whose throughput is reported.
const minRated = int64(time.Second)

func (s *Stats) rated() bool { return s.Duration >= minRated }

// histogram counts latencies in log-linear buckets: exact below
// histSub, and above in histSub buckets per power of two, so that a
// percentile read from it is at most 1/histSub (0.8%) above the true one,
// in memory that does not grow with the count.
type histogram struct {
	counts   []int
	n        int
	min, max int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
)

func histIndex(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1
	return histSub + e*histSub + int(v>>e) - histSub
}

// histUpper is the largest value of bucket i.
func histUpper(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	e := (i - histSub) / histSub
	m := int64((i-histSub)%histSub + histSub)
	return (m+1)<<e - 1
}

func (h *histogram) add(v int64) {
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if h.n == 0 || v > h.max {
		h.max = v
	}
	h.n++
	i := histIndex(v)
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]int, i+1-len(h.counts))...)
	}
	h.counts[i]++
}

// quantile is the value at rank p·n, as the sorted slice's
// ds[min(n-1, int(p·n))], to within the bucket's width.
func (h *histogram) quantile(p float64) int64 {
	rank := min(h.n-1, int(p*float64(h.n)))
	seen := 0
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			return min(h.max, max(h.min, histUpper(i)))
		}
	}
	return h.max
}

func (h *histogram) latency() *Latency {
	return &Latency{Count: h.n, P50: h.quantile(0.50), P90: h.quantile(0.90), P99: h.quantile(0.99), Max: h.max}
}
