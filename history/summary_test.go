package history

import (
	"testing"
	"time"
)

// TestRecorderSummarizesFailedAcquires: with failed acquires summarised,
// a failed acquire's invoke and fail are replaced by a count, an acquire
// with any other outcome is written in full, the file stays numbered and
// ordered in time, and what a process did around its failed acquires
// keeps its pairs.
func TestRecorderSummarizesFailedAcquires(t *testing.T) {
	rec, path := tempRecorder(t, "history.jsonl.zst")
	rec.SummarizeFailedAcquires()
	var seen []Op
	rec.Observe(func(op Op) { seen = append(seen, op) })
	pair := func(p int, f string, typ Type, out *Value) {
		rec.Record(Op{Process: p, Type: Invoke, F: f, Key: "k", Value: &Value{TTL: 5e8}})
		rec.Record(Op{Process: p, Type: typ, F: f, Key: "k", Value: out})
	}
	// Process 1's acquire is in flight while process 2 fails three times:
	// process 2's fails wait behind it and are dropped all the same.
	rec.Record(Op{Process: 1, Type: Invoke, F: Acquire, Key: "k", Value: &Value{TTL: 5e8}})
	for range 3 {
		pair(2, Acquire, Fail, nil)
	}
	rec.Record(Op{Process: 1, Type: OK, F: Acquire, Key: "k", Value: &Value{Token: "t1"}})
	pair(2, Acquire, Info, nil) // unknown: kept
	pair(1, Release, OK, nil)
	pair(2, Acquire, Fail, nil)
	pair(3, Acquire, Fail, nil)
	// An acquire left in flight at the end is written as it is.
	rec.Record(Op{Process: 4, Type: Invoke, F: Acquire, Key: "k", Value: &Value{TTL: 5e8}})
	// A dropped pair holds nothing back: all but the acquire in flight
	// is written at the next flush.
	if err := rec.flushNow(); err != nil {
		t.Fatal(err)
	}
	if n := rec.Count(); n < 6 {
		t.Fatalf("%d events written before the end, want the 6 before the acquire in flight", n)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := ReadFile(path)
	if err != nil {
		t.Fatalf("the summarised history does not validate: %v", err)
	}
	var got []string
	counts := map[int]int64{}
	for _, op := range res.Ops {
		got = append(got, ProcessName(op.Process)+" "+string(op.Type)+" "+op.F)
		if op.Type == Summary {
			counts[op.Process] += op.Value.Count
			if *op.Value.From > *op.Value.To || *op.Value.To > op.Time {
				t.Errorf("summary %v spans %d..%d", op, *op.Value.From, *op.Value.To)
			}
		}
	}
	want := []string{"1 invoke acquire", "1 ok acquire", "2 invoke acquire", "2 info acquire",
		"1 invoke release", "1 ok release", "4 invoke acquire", "2 summary acquire", "3 summary acquire"}
	if len(got) != len(want) {
		t.Fatalf("history:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("history:\n%q\nwant\n%q", got, want)
		}
	}
	if counts[2] != 4 || counts[3] != 1 {
		t.Errorf("summarised failures %v, want process 2: 4, process 3: 1", counts)
	}
	if len(seen) != len(res.Ops) {
		t.Errorf("observers saw %d events, the file has %d", len(seen), len(res.Ops))
	}
}

// TestRecorderLetsGoOfASlowAcquire: an acquire whose outcome takes longer
// than maxHeld is written without waiting for it, so a stuck client does
// not hold back the file or grow the recorder's memory; its failure is
// then written in full.
func TestRecorderLetsGoOfASlowAcquire(t *testing.T) {
	rec, path := tempRecorder(t, "history.jsonl")
	rec.SummarizeFailedAcquires()
	invoked := time.Now()
	rec.Record(Op{Process: 1, Type: Invoke, F: Acquire, Key: "k", Value: &Value{TTL: 5e8}})
	rec.Record(Op{Process: 2, Type: Invoke, F: Release, Key: "k", Value: &Value{Token: "t"}})
	if err := rec.flushNow(); err != nil {
		t.Fatal(err)
	}
	// Unless the machine stalled us for maxHeld, the invoke still waits.
	if n := rec.Count(); n != 0 && time.Since(invoked) < maxHeld {
		t.Fatalf("%d events written while the acquire's outcome is unknown, want 0", n)
	}
	deadline := time.Now().Add(time.Minute)
	for rec.Count() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute %d events written, want the held acquire and the release (maxHeld %v)", rec.Count(), maxHeld)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec.Record(Op{Process: 1, Type: Fail, F: Acquire, Key: "k"})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Ops) != 3 || res.Ops[2].Type != Fail {
		t.Fatalf("history %v, want the invoke, the release's invoke and the fail", res.Ops)
	}
}
