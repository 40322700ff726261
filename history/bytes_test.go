package history

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// historyLines are events as the harness records them and the exact line
// each is written as: the history's bytes are a public format, and a
// faster path must write the same ones.
var historyLines = []struct {
	op   Op
	line string
}{
	{Op{Index: 0, Time: 1500, Process: 3, Type: Invoke, F: Acquire, Key: "lock-7", Value: &Value{TTL: 1_000_000_000}},
		`{"index":0,"time":1500,"process":3,"type":"invoke","f":"acquire","key":"lock-7","value":{"ttl":1000000000}}`},
	{Op{Index: 1, Time: 91_234, Process: 3, Type: OK, F: Acquire, Key: "lock-7", Value: &Value{Token: "p3.17", ValidUntil: I64(989_012_345), Started: I64(2_100)}},
		`{"index":1,"time":91234,"process":3,"type":"ok","f":"acquire","key":"lock-7","value":{"token":"p3.17","valid_until":989012345,"started":2100}}`},
	{Op{Index: 2, Time: 91_300, Process: 19, Type: Fail, F: Acquire, Key: "lock-7", Error: "lock-7 is held"},
		`{"index":2,"time":91300,"process":19,"type":"fail","f":"acquire","key":"lock-7","error":"lock-7 is held"}`},
	{Op{Index: 3, Time: 95_000, Process: 3, Type: Invoke, F: Release, Key: "lock-7", Value: &Value{Token: "p3.17"}},
		`{"index":3,"time":95000,"process":3,"type":"invoke","f":"release","key":"lock-7","value":{"token":"p3.17"}}`},
	{Op{Index: 4, Time: 1_095_000, Process: 3, Type: Info, F: Release, Key: "lock-7", Error: "release lock-7: context deadline exceeded"},
		`{"index":4,"time":1095000,"process":3,"type":"info","f":"release","key":"lock-7","error":"release lock-7: context deadline exceeded"}`},
	{Op{Index: 5, Time: 1_200_000, Process: NemesisProcess, Type: Info, F: "client-pause", Value: &Value{Phase: "start", Clients: []int{3}, Targets: []string{"client 3"}, Detail: "paused 150ms"}},
		`{"index":5,"time":1200000,"process":"nemesis","type":"info","f":"client-pause","value":{"phase":"start","targets":["client 3"],"clients":[3],"detail":"paused 150ms"}}`},
	{Op{Index: 6, Time: 1_300_000, Process: 4, Type: OK, F: Acquire, Key: "lock-1", Value: &Value{Token: "p4.2", Fence: I64(9), ValidUntil: I64(2_300_000), Nodes: []string{"n1", "n2", "n3"}}},
		`{"index":6,"time":1300000,"process":4,"type":"ok","f":"acquire","key":"lock-1","value":{"token":"p4.2","valid_until":2300000,"fence":9,"nodes":["n1","n2","n3"]}}`},
}

// TestHistoryBytesAreUnchanged: each event is written as the exact line
// above, and a recorder's file (compressed, through its writer
// goroutine) holds exactly the lines of the events it stamped, in order.
func TestHistoryBytesAreUnchanged(t *testing.T) {
	for _, tt := range historyLines {
		if got := string(AppendJSON(nil, &tt.op)); got != tt.line {
			t.Errorf("event %d:\n got %s\nwant %s", tt.op.Index, got, tt.line)
		}
	}
	path := filepath.Join(t.TempDir(), "history.jsonl"+CompressedSuffix)
	rec, err := Create(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for _, tt := range historyLines {
		op := tt.op
		op.Index, op.Time = 0, 0
		stamped := rec.Record(op)
		want = append(AppendJSON(want, &stamped), '\n')
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the file holds\n%s\nwant\n%s", got, want)
	}
}
