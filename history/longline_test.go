package history

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A line longer than MaxLine, in the middle of a history or at its end:
// the strict reader refuses it as a FormatError before reading it whole;
// the lenient readers skip it as one bad line and read every event around
// it. A 1 GiB line in a 34 KB compressed history once cost `check` 11.6 GB.
func TestLongLinesAreCapped(t *testing.T) {
	events := lenientHistory(3000, "")
	basePath := filepath.Join(t.TempDir(), "base.jsonl")
	if err := os.WriteFile(basePath, events, 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := ReadLenient(basePath)
	if err != nil {
		t.Fatal(err)
	}
	long := "{\"index\":1,\"detail\":\"" + strings.Repeat("x", 3*MaxLine) + "\"}"
	cut := bytes.IndexByte(events[len(events)/2:], '\n') + len(events)/2 + 1
	cases := []struct {
		name string
		data []byte
	}{
		{"in the middle", append(append(append([]byte(nil), events[:cut]...), long+"\n"...), events[cut:]...)},
		{"at the end, without a newline", append(append([]byte(nil), events...), long...)},
		{"just over the cap, in the middle", append(append(append([]byte(nil), events[:cut]...), strings.Repeat(" ", MaxLine)+"x\n"...), events[cut:]...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.jsonl")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadFile(path); !errors.As(err, new(*FormatError)) {
				t.Errorf("strict read: %v, want a FormatError", err)
			}
			lr, err := ReadLenient(path)
			if err != nil {
				t.Fatal(err)
			}
			scanChunkSize = 64 << 10 // lines straddle chunks
			defer func() { scanChunkSize = 256 << 10 }()
			sc := scanAll(t, path)
			for name, r := range map[string]*LenientRead{"ReadLenient": lr, "LenientScanner": sc} {
				if len(r.Ops) != len(base.Ops) {
					t.Errorf("%s: %d events, want %d", name, len(r.Ops), len(base.Ops))
				}
				if r.Bad != base.Bad+1 {
					t.Errorf("%s: %d bad lines, want %d and the long line", name, r.Bad, base.Bad)
				}
			}
		})
	}
}

// The strict reader names the long line's number and what is wrong with
// it, on a history that is otherwise whole.
func TestStrictReaderRefusesALongLine(t *testing.T) {
	var buf bytes.Buffer
	for i := range 10 {
		op := Op{Index: int64(i), Time: int64(i) * 1000, Process: 1, Type: Invoke, F: Acquire, Key: "lock-0", Value: &Value{TTL: 500}}
		if i%2 == 1 {
			op.Type, op.Value = Fail, nil
		}
		buf.Write(AppendJSON(nil, &op))
		buf.WriteByte('\n')
		if i == 5 {
			buf.WriteString(strings.Repeat("x", MaxLine+1) + "\n")
		}
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	var ferr *FormatError
	if !errors.As(err, &ferr) || !strings.Contains(err.Error(), "history.jsonl:7:") || !strings.Contains(err.Error(), "a line of more than") {
		t.Errorf("strict read: %v, want a FormatError naming line 7 as too long", err)
	}
}
