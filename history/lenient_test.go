package history

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The fast reader gives the same events as the validating one.
func TestReadLenientMatchesDecode(t *testing.T) {
	ops := []Op{
		{Index: 0, Time: 1, Process: 3, Type: Invoke, F: "acquire", Key: "lock-0", Value: &Value{TTL: 500}},
		{Index: 1, Time: 2, Process: 3, Type: OK, F: "acquire", Key: "lock-0", Value: &Value{Token: "p3.1", ValidUntil: I64(400), Fence: I64(7)}},
		{Index: 2, Time: 3, Process: NemesisProcess, Type: Info, F: "client-pause", Value: &Value{Phase: "start", Targets: []string{"client 3"}, Clients: []int{3}, Detail: `stall "739ms" <x>`}},
		{Index: 3, Time: 4, Process: 3, Type: Invoke, F: "write", Key: "lock-0", Value: &Value{N: I64(-1), Fence: I64(7)}},
		{Index: 4, Time: 5, Process: 3, Type: Fail, F: "write", Key: "lock-0", Error: "stale fence é"},
		{Index: 5, Time: 6, Process: 3, Type: Invoke, F: "read", Key: "lock-0", Value: &Value{}},
		{Index: 6, Time: 7, Process: 3, Type: Background, F: "extend", Key: "lock-0", Value: &Value{TTL: 500, Token: "p3.1", From: I64(6), Outcome: Fail}, Error: "not held"},
	}
	var buf bytes.Buffer
	for i := range ops {
		buf.Write(AppendJSON(nil, &ops[i]))
		buf.WriteByte('\n')
	}
	buf.WriteString(`{"index":7, "time":8,"process":3,"type":"ok","f":"read","key":"lock-0","value":{"n":5},"extra":1}` + "\n")
	buf.WriteString("not json\n")
	buf.WriteString(`{"index":8,"time":9`)
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	hr, err := ReadLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Decode(strings.NewReader(buf.String()[:strings.Index(buf.String(), "not json")]), "h")
	if !reflect.DeepEqual(hr.Ops, want.Ops) {
		t.Errorf("fast reader:\n%+v\nencoding/json:\n%+v", hr.Ops, want.Ops)
	}
	if hr.Bad != 1 || !hr.Truncated {
		t.Errorf("bad %d truncated %v, want 1 bad line and a truncated end", hr.Bad, hr.Truncated)
	}
}
