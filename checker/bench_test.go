package checker

import (
	"fmt"
	"sort"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// genHistory generates a counter-workload history of about nOps client
// operations in rounds: a holder acquires, reads, writes, extends and
// releases while a contender's acquire fails. Every violateEvery-th round
// (0: never) the contender's acquire succeeds too and both write the same
// value: a mutual-exclusion violation and a lost update.
func genHistory(nOps, violateEvery int) []history.Op {
	ops := make([]history.Op, 0, 2*nOps+16)
	genEvents(nOps, violateEvery, func(op history.Op) { ops = append(ops, op) })
	return ops
}

// genEvents is genHistory handing each event to emit as it is made, so
// that a test can feed a history of any length without holding it.
func genEvents(nOps, violateEvery int, emit func(history.Op)) {
	const clients, keys = 16, 4
	counter := make([]int64, keys)
	var round []history.Op
	add := func(t int64, p int, typ history.Type, f, key string, v *history.Value) {
		round = append(round, history.Op{Time: t, Process: p, Type: typ, F: f, Key: key, Value: v})
	}
	index, last := int64(0), int64(0)
	flush := func() {
		sort.SliceStable(round, func(i, j int) bool { return round[i].Time < round[j].Time })
		for _, op := range round {
			op.Index = index
			index++
			last = op.Time
			emit(op)
		}
		round = round[:0]
	}
	n := 0
	for r := 0; n < nOps; r++ {
		T := int64(r) * 10_000
		k := r % keys
		key := fmt.Sprintf("lock-%d", k)
		c, d := r%clients, (r+5)%clients
		tok, dtok := fmt.Sprintf("c%d-%d", c, r), fmt.Sprintf("c%d-%d", d, r)
		fence, dfence := history.I64(int64(2*r)), history.I64(int64(2*r+1))
		violate := violateEvery > 0 && r%violateEvery == violateEvery-1
		add(T, c, history.Invoke, history.Acquire, key, &history.Value{TTL: 1e6})
		add(T+100, d, history.Invoke, history.Acquire, key, &history.Value{TTL: 1e6})
		add(T+1000, c, history.OK, history.Acquire, key, &history.Value{Token: tok, Fence: fence, ValidUntil: history.I64(T + 5000)})
		v := counter[k]
		add(T+2000, c, history.Invoke, history.Read, key, nil)
		add(T+2200, c, history.OK, history.Read, key, &history.Value{N: history.I64(v)})
		add(T+2300, c, history.Invoke, history.Write, key, &history.Value{N: history.I64(v + 1), Fence: fence})
		add(T+2500, c, history.OK, history.Write, key, nil)
		counter[k] = v + 1
		if violate {
			add(T+1500, d, history.OK, history.Acquire, key, &history.Value{Token: dtok, Fence: dfence, ValidUntil: history.I64(T + 5000)})
			add(T+2050, d, history.Invoke, history.Read, key, nil)
			add(T+2250, d, history.OK, history.Read, key, &history.Value{N: history.I64(v)})
			add(T+2400, d, history.Invoke, history.Write, key, &history.Value{N: history.I64(v + 1), Fence: dfence})
			add(T+2600, d, history.OK, history.Write, key, nil)
			add(T+4100, d, history.Invoke, history.Release, key, &history.Value{Token: dtok})
			add(T+4300, d, history.OK, history.Release, key, nil)
			n += 3
		} else {
			add(T+1500, d, history.Fail, history.Acquire, key, nil)
		}
		add(T+3000, c, history.Invoke, history.Extend, key, &history.Value{Token: tok, TTL: 1e6})
		add(T+3200, c, history.OK, history.Extend, key, &history.Value{ValidUntil: history.I64(T + 6000)})
		add(T+4000, c, history.Invoke, history.Release, key, &history.Value{Token: tok})
		add(T+4200, c, history.OK, history.Release, key, nil)
		if r%10_000 == 0 {
			add(T+50, history.NemesisProcess, history.Info, "partition", "", &history.Value{Phase: "start", Targets: []string{"n1"}})
			add(T+9000, history.NemesisProcess, history.Info, "partition", "", &history.Value{Phase: "stop"})
		}
		n += 6
		flush()
	}
	// A final read per key, after every write.
	T := last + 1000
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("lock-%d", k)
		add(T, k, history.Invoke, history.Read, key, nil)
		add(T+100, k, history.OK, history.Read, key, &history.Value{N: history.I64(counter[k])})
	}
	flush()
}

func TestGeneratedHistories(t *testing.T) {
	legal := genHistory(20_000, 0)
	if r := Check(legal, Options{}); r.Verdict != VerdictSafe || r.Disagreement != "" || r.Ops < 20_000 {
		t.Fatalf("legal: %v %q", r.Summary(), r.Disagreement)
	}
	bad := genHistory(20_000, 100)
	r := Check(bad, Options{})
	if r.Verdict != VerdictUnsafe || r.Violations == 0 || r.Disagreement != "" || r.Resource.Duplicates != r.Violations ||
		r.Resource.LostUpdates != r.Violations || r.Linearizability.Valid != ValidFalse ||
		r.Linearizability.SegmentsIllegal != r.Violations {
		t.Fatalf("with violations: %v %q %+v", r.Summary(), r.Disagreement, r.Resource)
	}
}

func BenchmarkExclusion1M(b *testing.B) {
	ops := genHistory(1_000_000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := Exclusion(ops); !r.Valid {
			b.Fatal("generated legal history has violations")
		}
	}
}

func BenchmarkCheck1MWithViolations(b *testing.B) {
	ops := genHistory(1_000_000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := Check(ops, Options{})
		if r.Verdict != VerdictUnsafe || r.Disagreement != "" {
			b.Fatalf("%v %q", r.Summary(), r.Disagreement)
		}
		if i == 0 {
			for _, l := range r.Summary() {
				b.Log(l)
			}
		}
	}
}
