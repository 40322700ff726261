package checker

import (
	"testing"
	"time"
)

// BenchmarkStream1M is the live check's own work on a generated history of
// a million events with violations: the Stream's rules, witnesses and
// porcupine's segments, but a budget too small to start porcupine, whose
// search would otherwise be most of the time. An op is one history.
func BenchmarkStream1M(b *testing.B) {
	ops := genHistory(1_000_000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := NewStream(Options{LinearizabilityBudget: time.Nanosecond})
		for j := range ops {
			s.Add(ops[j])
		}
		if r, err := s.Finish(b.Context()); err != nil || r.Verdict != VerdictUnsafe {
			b.Fatalf("%v %v", r.Summary(), err)
		}
	}
}
