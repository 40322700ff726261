package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	ops := []Op{
		{Index: 0, Time: 10, Process: 3, Type: Invoke, F: Acquire, Key: "lock-0", Value: &Value{TTL: 500}},
		{Index: 1, Time: 20, Process: 3, Type: OK, F: Acquire, Key: "lock-0", Value: &Value{Token: "p3.1", ValidUntil: I64(480), Fence: I64(0)}},
		{Index: 2, Time: 30, Process: NemesisProcess, Type: Info, F: "client-pause", Value: &Value{Phase: "start", Clients: []int{3}, Targets: []string{"client 3"}, Detail: `stall "long" <1s>`}},
		{Index: 3, Time: 40, Process: 3, Type: Invoke, F: Write, Key: "lock-0", Value: &Value{N: I64(0), Fence: I64(7)}},
		{Index: 4, Time: 50, Process: 3, Type: Info, F: Write, Key: "lock-0", Error: "i/o timeout\n\"x\""},
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
		{"garbage in the middle", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\nnot json\n" + good, false, 2, "not a history event"},
		{"bad type", `{"index":0,"time":1,"process":0,"type":"maybe","f":"acquire"}` + "\n", false, 1, "type"},
		{"bad process", `{"index":0,"time":1,"process":"x","type":"invoke","f":"acquire"}` + "\n", false, 1, "process"},
		{"index gap", `{"index":1,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n", false, 1, "index"},
		{"time goes back", `{"index":0,"time":5,"process":0,"type":"invoke","f":"acquire"}` + "\n" + `{"index":1,"time":4,"process":0,"type":"ok","f":"acquire"}` + "\n", false, 2, "time"},
		{"completion without invoke", `{"index":0,"time":1,"process":0,"type":"ok","f":"acquire"}` + "\n", false, 1, "no pending invoke"},
		{"double invoke", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" + `{"index":1,"time":2,"process":0,"type":"invoke","f":"release"}` + "\n", false, 2, "has not completed"},
		{"wrong f", `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire"}` + "\n" + `{"index":1,"time":2,"process":0,"type":"ok","f":"release"}` + "\n", false, 2, "pending invoke is acquire"},
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
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := Create(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
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
