package history

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// scanAll reads a whole history with a LenientScanner as a LenientRead.
func scanAll(t *testing.T, path string) *LenientRead {
	t.Helper()
	s, err := OpenLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := &LenientRead{}
	for op, ok := s.Next(); ok; op, ok = s.Next() {
		got.Ops = append(got.Ops, op)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if s.Events() != len(got.Ops) {
		t.Errorf("Events() = %d, read %d", s.Events(), len(got.Ops))
	}
	got.Bad, got.FirstBad = s.Bad()
	got.Truncated = s.Truncated()
	return got
}

// lenientHistory is many events across many chunks, with unreadable lines
// here and there, a line in a form the fast parser leaves to
// encoding/json, and tail as its end.
func lenientHistory(events int, tail string) []byte {
	var buf bytes.Buffer
	for i := range events {
		op := Op{Index: int64(i), Time: int64(i) * 1000, Process: i % 7, Type: Invoke, F: Acquire, Key: "lock-0", Value: &Value{TTL: 500}}
		if i%2 == 1 {
			op.Type, op.Value = OK, &Value{Token: fmt.Sprintf("p%d.%d", i%7, i), ValidUntil: I64(int64(i) * 2000)}
		}
		if i%50 == 0 {
			op = Op{Index: int64(i), Time: int64(i) * 1000, Process: NemesisProcess, Type: Info, F: "pause", Value: &Value{Phase: "start", Targets: []string{"n1"}, Detail: `SIGSTOP "1s"`}}
		}
		buf.Write(AppendJSON(nil, &op))
		buf.WriteByte('\n')
		switch {
		case i%997 == 3:
			fmt.Fprintf(&buf, "garbage line %d\n", i)
		case i%1301 == 5:
			fmt.Fprintf(&buf, "{\"index\": %d, \"time\":%d,\"process\":1,\"type\":\"fail\",\"f\":\"read\",\"extra\":true}\n\n", i, i*1000)
		}
	}
	buf.WriteString(tail)
	return buf.Bytes()
}

// The lenient scanner reads what ReadLenient reads, in both formats, with
// chunks small enough that lines straddle them: the same events, the same
// count and first of the bad lines, the same truncation.
func TestLenientScannerMatchesReadLenient(t *testing.T) {
	defer func(n int) { scanChunkSize = n }(scanChunkSize)
	scanChunkSize = 4096
	tails := map[string]string{
		"clean":            "",
		"cut last line":    `{"index":99999,"time":8`,
		"whole last line":  `{"index":99999,"time":99999999,"process":2,"type":"invoke","f":"release","key":"lock-0"}`,
		"bad last line":    "not json\n",
		"blank lines only": "\n\n  \n",
	}
	for name, tail := range tails {
		for _, compressed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/zst=%v", name, compressed), func(t *testing.T) {
				content := lenientHistory(5000, tail)
				path := filepath.Join(t.TempDir(), "history.jsonl")
				if compressed {
					path += CompressedSuffix
					content = compress(t, content)
				}
				if err := os.WriteFile(path, content, 0o644); err != nil {
					t.Fatal(err)
				}
				want, err := ReadLenient(path)
				if err != nil {
					t.Fatal(err)
				}
				got := scanAll(t, path)
				if !reflect.DeepEqual(got.Ops, want.Ops) {
					t.Fatalf("scanner read %d events, ReadLenient %d (or different ones)", len(got.Ops), len(want.Ops))
				}
				if got.Bad != want.Bad || got.FirstBad != want.FirstBad || got.Truncated != want.Truncated {
					t.Fatalf("scanner: bad %d %q truncated %v; ReadLenient: bad %d %q truncated %v",
						got.Bad, got.FirstBad, got.Truncated, want.Bad, want.FirstBad, want.Truncated)
				}
				if want.Bad == 0 {
					t.Fatalf("the history has no bad line: the test tests nothing")
				}
			})
		}
	}
}

// A compressed history cut mid-frame (a killed harness) reads to the last
// flushed block and says it was truncated, as ReadLenient does.
func TestLenientScannerCutStream(t *testing.T) {
	content := compress(t, lenientHistory(3000, ""))
	path := filepath.Join(t.TempDir(), "history.jsonl.zst")
	if err := os.WriteFile(path, content[:len(content)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := ReadLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	got := scanAll(t, path)
	if !reflect.DeepEqual(got.Ops, want.Ops) || got.Truncated != want.Truncated || !got.Truncated {
		t.Fatalf("scanner: %d events truncated %v; ReadLenient: %d events truncated %v", len(got.Ops), got.Truncated, len(want.Ops), want.Truncated)
	}
}

// A reader that stops early releases the file and the goroutines.
func TestLenientScannerCloseEarly(t *testing.T) {
	defer func(n int) { scanChunkSize = n }(scanChunkSize)
	scanChunkSize = 4096
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, lenientHistory(20000, ""), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, ok := s.Next(); !ok {
			t.Fatal("the history ended early")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := OpenLenient(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("opening a missing history did not fail")
	}
}

// compress makes one zstd stream of b, flushed every few lines as the
// recorder does, so that a cut stream keeps a readable prefix.
func compress(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		n := min(len(b), 8192)
		enc.Write(b[:n])
		enc.Flush()
		b = b[n:]
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
