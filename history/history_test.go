package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	ops := []Op{
		{Index: 0, Time: 10, Process: 3, Type: Invoke, F: Acquire, Key: "lock-0", Value: &Value{TTL: 500}},
		{Index: 1, Time: 20, Process: 3, Type: OK, F: Acquire, Key: "lock-0", Value: &Value{Token: "p3.1", ValidUntil: I64(480), Fence: I64(0), Nodes: []string{"n1", "n3"}}},
		{Index: 2, Time: 30, Process: NemesisProcess, Type: Info, F: "client-pause", Value: &Value{Phase: "start", Clients: []int{3}, Targets: []string{"client 3"}, Detail: `stall "long" <1s>`}},
		{Index: 3, Time: 40, Process: 3, Type: Invoke, F: Write, Key: "lock-0", Value: &Value{N: I64(0), Fence: I64(7)}},
		{Index: 4, Time: 50, Process: 3, Type: Info, F: Write, Key: "lock-0", Error: "i/o timeout\n\"x\""},
		{Index: 5, Time: 60, Process: 3, Type: Background, F: Extend, Key: "lock-0", Value: &Value{TTL: 500, Token: "p3.1", From: I64(55), Outcome: OK, ValidUntil: I64(550)}},
		{Index: 6, Time: 70, Process: 3, Type: Background, F: Extend, Key: "lock-0", Value: &Value{TTL: 500, Token: "p3.1", From: I64(65), Outcome: Info}, Error: "timeout"},
		{Index: 7, Time: 80, Process: 4, Type: Invoke, F: Acquire, Key: "lock-1", Value: &Value{TTL: 500}},
		{Index: 8, Time: 90, Process: 4, Type: OK, F: Acquire, Key: "lock-1", Value: &Value{Token: "p4.1", Started: I64(85), Context: true}},
		{Index: 9, Time: 99, Process: 4, Type: Background, F: Extend, Key: "lock-1", Value: &Value{Token: "p4.1", From: I64(99), Outcome: Fail, Ended: EndedNotification}},
	}
	var buf bytes.Buffer
	for i := range ops {
		buf.Write(AppendJSON(nil, &ops[i]))
		buf.WriteByte('\n')
	}
	// The hand-written encoder must agree with encoding/json's reading.
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("invalid JSON: %s", line)
		}
	}
	if !strings.Contains(buf.String(), `"process":"nemesis"`) {
		t.Fatal(`nemesis must be written as "nemesis"`)
	}
	res, err := Decode(&buf, "h")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Ops) != len(ops) || res.Truncated {
		t.Fatalf("read %d ops, truncated=%v", len(res.Ops), res.Truncated)
	}
	for i := range ops {
		a, _ := json.Marshal(ops[i])
		b, _ := json.Marshal(res.Ops[i])
		if !bytes.Equal(a, b) {
			t.Fatalf("op %d:\n wrote %s\n read  %s", i, a, b)
		}
	}
}

func TestDecodeProblems(t *testing.T) {
	good := `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}
{"index":1,"time":2,"process":0,"type":"ok","f":"acquire","key":"k","value":{"token":"t"}}
`
	cases := []struct {
		name      string
		input     string
		truncated bool
		errLine   int // 0: no error
		errHas    string
	}{
		{"good", good, false, 0, ""},
		{"empty", "", false, 0, ""},
		{"truncated last line", good + `{"index":2,"time":3,"pro`, true, 0, ""},
		{"garbage in the middle", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\nnot json\n" + good, false, 2, "not a history event"},
		{"bad type", `{"index":0,"time":1,"process":0,"type":"maybe","f":"acquire","key":"k"}` + "\n", false, 1, "type"},
		{"bad process", `{"index":0,"time":1,"process":"x","type":"invoke","f":"acquire","key":"k"}` + "\n", false, 1, "process"},
		{"index gap", `{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n", false, 1, "index"},
		{"time goes back", `{"index":0,"time":5,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n" + `{"index":1,"time":4,"process":0,"type":"ok","f":"acquire","key":"k","value":{"token":"t"}}` + "\n", false, 2, "time"},
		{"completion without invoke", `{"index":0,"time":1,"process":0,"type":"ok","f":"acquire","key":"k","value":{"token":"t"}}` + "\n", false, 1, "no pending invoke"},
		{"double invoke", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n" + `{"index":1,"time":2,"process":0,"type":"invoke","f":"release","key":"k"}` + "\n", false, 2, "has not completed"},
		{"wrong f", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n" + `{"index":1,"time":2,"process":0,"type":"ok","f":"release","key":"k"}` + "\n", false, 2, "pending invoke is acquire"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Decode(strings.NewReader(tc.input), "h.jsonl")
			if tc.errLine == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if res.Truncated != tc.truncated {
					t.Fatalf("truncated=%v, want %v", res.Truncated, tc.truncated)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FormatError", err)
			}
			if fe.Line != tc.errLine || !strings.Contains(fe.Msg, tc.errHas) {
				t.Fatalf("got %v, want line %d mentioning %q", fe, tc.errLine, tc.errHas)
			}
		})
	}
}

func TestPairUnknownAtEnd(t *testing.T) {
	ops := []Op{
		{Index: 0, Time: 1, Process: 0, Type: Invoke, F: Acquire},
		{Index: 1, Time: 2, Process: 1, Type: Invoke, F: Acquire},
		{Index: 2, Time: 3, Process: 0, Type: Fail, F: Acquire},
		{Index: 3, Time: 4, Process: NemesisProcess, Type: Info, F: "x"},
	}
	operations, nem := Pair(ops)
	if len(operations) != 2 || len(nem) != 1 {
		t.Fatalf("got %d operations, %d nemesis events", len(operations), len(nem))
	}
	if operations[0].Outcome() != Fail || operations[1].Outcome() != Info || operations[1].End(99) != 99 {
		t.Fatal("wrong outcomes")
	}
}

// Concurrent clients record; the file must be a valid history in index and
// time order, and a reader must see a prefix before Close.
func TestRecorderConcurrent(t *testing.T) {
	rec, path := tempRecorder(t, "history.jsonl")
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				rec.Record(Op{Process: p, Type: Invoke, F: Acquire, Key: "k"})
				rec.Record(Op{Process: p, Type: Fail, F: Acquire, Key: "k", Error: "not acquired"})
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Count(b, []byte("\n")) == 8000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recorder did not flush within 2s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	rec.Record(Op{Process: 0, Type: Invoke, F: Acquire}) // after Close: dropped
	res, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Ops) != 8000 {
		t.Fatalf("read %d ops", len(res.Ops))
	}
}

func BenchmarkRecord(b *testing.B) {
	rec, err := Create(filepath.Join(b.TempDir(), "h"), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	v := &Value{Token: "p3.12345", ValidUntil: I64(123456789), Fence: I64(42)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rec.Record(Op{Process: 3, Type: OK, F: Acquire, Key: "lock-0", Value: v})
		}
	})
}

// BenchmarkRecordClients is the recorder as a run of 16 clients uses it:
// 16 goroutines (on two cores, eight a P) each recording a lock cycle's
// four events, with one observer taking a copy of each, as the check
// alongside the run does. ns/op is per event, all goroutines together,
// so it grows with the time the recorder's lock is held and contended.
func BenchmarkRecordClients(b *testing.B) {
	rec, err := Create(filepath.Join(b.TempDir(), "h"+CompressedSuffix), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	batch := make([]Op, 0, 1024)
	rec.Observe(func(op Op) {
		if batch = append(batch, op); len(batch) == cap(batch) {
			batch = batch[:0]
		}
	})
	var procs atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		p := int(procs.Add(1))
		ttl := &Value{TTL: 1_000_000_000}
		grant := &Value{Token: "p3.12345", ValidUntil: I64(123456789), Started: I64(1234)}
		release := &Value{Token: "p3.12345"}
		for i := 0; pb.Next(); i++ {
			switch i % 4 {
			case 0:
				rec.Record(Op{Process: p, Type: Invoke, F: Acquire, Key: "lock-7", Value: ttl})
			case 1:
				rec.Record(Op{Process: p, Type: OK, F: Acquire, Key: "lock-7", Value: grant})
			case 2:
				rec.Record(Op{Process: p, Type: Invoke, F: Release, Key: "lock-7", Value: release})
			case 3:
				rec.Record(Op{Process: p, Type: OK, F: Release, Key: "lock-7"})
			}
		}
	})
}

// processCPU is this process's user plus system time in ns: on a shared
// machine a benchmark's wall time says more about the others' load.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkValidator is the check the harness's live check makes of every
// event: 16 processes' invokes and completions.
func BenchmarkValidator(b *testing.B) {
	ops := make([]Op, 0, 32)
	for p := range 16 {
		ops = append(ops, Op{Process: p, Type: Invoke, F: Acquire, Key: "lock-1", Value: &Value{TTL: 1}})
	}
	for p := range 16 {
		ops = append(ops, Op{Process: p, Type: OK, F: Acquire, Key: "lock-1", Value: &Value{Token: "t"}})
	}
	v := NewValidator("h")
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		op := ops[i%len(ops)]
		op.Index = int64(i)
		if err := v.Check(&op); err != nil {
			b.Fatal(err)
		}
	}
}

// Events that are well formed JSON but mean nothing the checkers can judge
// must be rejected with the line, not checked.
func TestDecodeRejectsOddEvents(t *testing.T) {
	const inv = `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k","value":{"ttl":5}}` + "\n"
	line := func(index int, rest string) string {
		return `{"index":` + strconv.Itoa(index) + `,"time":2,` + rest + "}\n"
	}
	cases := []struct {
		name   string
		input  string
		errHas string
	}{
		{"unknown f", line(0, `"process":0,"type":"invoke","f":"frobnicate","key":"k"`), `f "frobnicate"`},
		{"client op without key", line(0, `"process":0,"type":"invoke","f":"acquire"`), `no "key"`},
		{"completion without key", inv + line(1, `"process":0,"type":"ok","f":"acquire","value":{"token":"t"}`), `no "key"`},
		{"completion on another key", inv + line(1, `"process":0,"type":"ok","f":"acquire","key":"j","value":{"token":"t"}`), `names key "j"`},
		{"ok acquire without value", inv + line(1, `"process":0,"type":"ok","f":"acquire","key":"k"`), "value.token"},
		{"ok acquire without token", inv + line(1, `"process":0,"type":"ok","f":"acquire","key":"k","value":{"valid_until":9}`), "value.token"},
		{"ok acquire with negative valid_until", inv + line(1, `"process":0,"type":"ok","f":"acquire","key":"k","value":{"token":"t","valid_until":-1}`), "valid_until -1 < 0"},
		{"invoke write without value", line(0, `"process":0,"type":"invoke","f":"write","key":"k"`), "value.n"},
		{"invoke write without n", line(0, `"process":0,"type":"invoke","f":"write","key":"k","value":{"fence":3}`), "value.n"},
		{"process above the limit", line(0, `"process":2147483648,"type":"invoke","f":"acquire","key":"k"`), "out of range"},
		{"huge process", line(0, `"process":99999999999999,"type":"invoke","f":"acquire","key":"k"`), "out of range"},
		{"a large process invokes twice", line(0, `"process":70000,"type":"invoke","f":"acquire","key":"k"`) + line(1, `"process":70000,"type":"invoke","f":"release","key":"k"`), "while its acquire has not completed"},
		{"a large process completes another call", line(0, `"process":70000,"type":"invoke","f":"acquire","key":"k"`) + line(1, `"process":70000,"type":"ok","f":"release","key":"k"`), "whose pending invoke is acquire"},
		{"a large process completes nothing", line(0, `"process":70000,"type":"ok","f":"acquire","key":"k","value":{"token":"t"}`), "no pending invoke"},
		{"a small process completes nothing", line(0, `"process":3,"type":"ok","f":"acquire","key":"k","value":{"token":"t"}`), "no pending invoke"},
		{"nemesis invoke", line(0, `"process":"nemesis","type":"invoke","f":"client-pause","value":{"phase":"start"}`), "want info"},
		{"nemesis ok", line(0, `"process":"nemesis","type":"ok","f":"client-pause","value":{"phase":"start"}`), "want info"},
		{"nemesis without value", line(0, `"process":"nemesis","type":"info","f":"client-pause"`), "no value.phase"},
		{"nemesis without phase", line(0, `"process":"nemesis","type":"info","f":"client-pause","value":{"targets":["n1"]}`), "no value.phase"},
		{"nemesis with an unknown phase", line(0, `"process":"nemesis","type":"info","f":"client-pause","value":{"phase":"begin"}`), `phase "begin"`},
		{"background acquire", line(0, `"process":0,"type":"background","f":"acquire","key":"k","value":{"from":1,"outcome":"ok"}`), "only renewals"},
		{"background without key", line(0, `"process":0,"type":"background","f":"extend","value":{"from":1,"outcome":"ok"}`), `no "key"`},
		{"background without from", line(0, `"process":0,"type":"background","f":"extend","key":"k","value":{"outcome":"ok"}`), "value.from"},
		{"background sent after it completed", line(0, `"process":0,"type":"background","f":"extend","key":"k","value":{"from":3,"outcome":"ok"}`), "not within 0..2"},
		{"background without outcome", line(0, `"process":0,"type":"background","f":"extend","key":"k","value":{"from":1}`), "value.outcome"},
		{"background with an odd outcome", line(0, `"process":0,"type":"background","f":"extend","key":"k","value":{"from":1,"outcome":"invoke"}`), "value.outcome"},
		{"background that ended the belief with ok", line(0, `"process":0,"type":"background","f":"extend","key":"k","value":{"from":1,"outcome":"ok","ended":"deadline"}`), "outcome ok"},
		{"background ended for an unknown reason", line(0, `"process":0,"type":"background","f":"extend","key":"k","value":{"from":1,"outcome":"fail","ended":"bored"}`), `value.ended "bored"`},
		{"summary of a release", line(0, `"process":0,"type":"summary","f":"release","key":"k","value":{"count":2,"from":0,"to":1}`), "only failed acquires"},
		{"summary without key", line(0, `"process":0,"type":"summary","f":"acquire","value":{"count":2,"from":0,"to":1}`), `no "key"`},
		{"summary without count", line(0, `"process":0,"type":"summary","f":"acquire","key":"k","value":{"from":0,"to":1}`), "value.count > 0"},
		{"summary without span", line(0, `"process":0,"type":"summary","f":"acquire","key":"k","value":{"count":2}`), "value.from"},
		{"summary ending after its time", line(0, `"process":0,"type":"summary","f":"acquire","key":"k","value":{"count":2,"from":0,"to":3}`), "not within 0..2"},
		{"summary backwards", line(0, `"process":0,"type":"summary","f":"acquire","key":"k","value":{"count":2,"from":2,"to":1}`), "not within"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.input), "h.jsonl")
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FormatError", err)
			}
			want := strings.Count(tc.input, "\n")
			if fe.Line != want || !strings.Contains(fe.Msg, tc.errHas) {
				t.Fatalf("got %v, want line %d mentioning %q", fe, want, tc.errHas)
			}
		})
	}
}

// Everything the harness records (see workloads, nemesis and harness's
// final reads) must stay acceptable.
func TestDecodeAcceptsHarnessEvents(t *testing.T) {
	rec, _ := tempRecorder(t, "history.jsonl")
	const clients = 2000
	ok := func(p int, f, key string, in, out *Value) {
		rec.Record(Op{Process: p, Type: Invoke, F: f, Key: key, Value: in})
		rec.Record(Op{Process: p, Type: OK, F: f, Key: key, Value: out})
	}
	// mutex workload, token lock without fence, one with fence, no TTL
	ok(3, Acquire, "lock-0", &Value{TTL: 5e8}, &Value{Token: "p3.1", ValidUntil: I64(0)})
	// a watchdog's renewals, one while the holder's own operation is open
	rec.Record(Op{Process: 3, Type: Invoke, F: Read, Key: "lock-0", Value: &Value{}})
	for _, out := range []Type{OK, Fail, Info} {
		rec.Record(Op{Process: 3, Type: Background, F: Extend, Key: "lock-0", Value: &Value{TTL: 5e8, Token: "p3.1", From: I64(rec.Now()), Outcome: out}})
	}
	rec.Record(Op{Process: 3, Type: OK, F: Read, Key: "lock-0", Value: &Value{N: I64(0)}})
	ok(3, Extend, "lock-0", &Value{TTL: 5e8, Token: "p3.1"}, &Value{ValidUntil: I64(9e8)})
	ok(3, Release, "lock-0", &Value{Token: "p3.1"}, nil)
	ok(4, Acquire, "lock-1", &Value{TTL: 5e8}, &Value{Token: "p4.1", Fence: I64(0), ValidUntil: I64(4e8)})
	ok(5, Acquire, "lock-2", &Value{TTL: 5e8}, &Value{Token: "p5.1"})
	// counter workload: fenced and unfenced reads and writes
	ok(4, Read, "lock-1", &Value{Fence: I64(0)}, &Value{N: I64(0)})
	ok(4, Read, "lock-1", &Value{}, &Value{N: I64(0)})
	ok(4, Write, "lock-1", &Value{N: I64(1), Fence: I64(0)}, nil)
	ok(4, Write, "lock-1", &Value{N: I64(2)}, nil)
	// failures and unknown outcomes carry no value
	for _, typ := range []Type{Fail, Info} {
		for _, f := range []string{Acquire, Release, Extend, Read} {
			rec.Record(Op{Process: 6, Type: Invoke, F: f, Key: "lock-0", Value: &Value{TTL: 5e8, Token: "p6.1"}})
			rec.Record(Op{Process: 6, Type: typ, F: f, Key: "lock-0", Error: "no"})
		}
		rec.Record(Op{Process: 6, Type: Invoke, F: Write, Key: "lock-0", Value: &Value{N: I64(3), Fence: I64(1)}})
		rec.Record(Op{Process: 6, Type: typ, F: Write, Key: "lock-0", Error: "stale fence"})
	}
	// nemesis: client faults, node faults (which may fail), a replacement
	// process after a crash
	for _, phase := range []string{"start", "stop"} {
		rec.Record(Op{Process: NemesisProcess, Type: Info, F: "client-pause",
			Value: &Value{Phase: phase, Clients: []int{3}, Targets: []string{"client 3"}, Detail: "stall"}})
	}
	rec.Record(Op{Process: NemesisProcess, Type: Info, F: "client-crash",
		Value: &Value{Phase: "start", Clients: []int{5}, Targets: []string{"client 5"}, Detail: "crashed"}})
	for _, phase := range []string{"start", "stop", "error", "skipped"} {
		rec.Record(Op{Process: NemesisProcess, Type: Info, F: "partition", Value: &Value{Phase: phase, Targets: []string{"n1"}}, Error: "x"})
	}
	rec.Record(Op{Process: NemesisProcess, Type: Info, F: "kill", Value: &Value{Phase: "stop"}})
	ok(5+clients, Acquire, "lock-2", &Value{TTL: 5e8}, &Value{Token: "p2005.1"})
	// the counter workload's final reads
	ok(clients*1_000_000, Read, "lock-1", nil, &Value{N: I64(2)})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := ReadFile(rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.Count(); int64(len(res.Ops)) != n || res.Truncated {
		t.Fatalf("read %d of %d events", len(res.Ops), n)
	}
}
