package history

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tempRecorder is a Recorder writing the file name in a directory of the
// test's own, and that file's path.
func tempRecorder(t *testing.T, name string) (*Recorder, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	rec, err := Create(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return rec, path
}

// recordSome writes n acquire/ok pairs through a Recorder at path, closing
// it when close is set, and returns the events as recorded.
func recordSome(t *testing.T, path string, n int, close bool) []Op {
	t.Helper()
	rec, err := Create(path, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ops []Op
	for i := range n {
		p := i % 5
		ops = append(ops, rec.Record(Op{Process: p, Type: Invoke, F: Acquire, Key: "k", Value: &Value{TTL: 1e9}}))
		ops = append(ops, rec.Record(Op{Process: p, Type: Fail, F: Acquire, Key: "k"}))
	}
	if close {
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Cleanup(func() { rec.Close() })
		if err := rec.flushNow(); err != nil {
			t.Fatal(err)
		}
	}
	return ops
}

// Both formats read back the same events, by either reader; a compressed
// stream that was flushed but never closed (a killed harness) reads back
// as truncated, with every flushed event.
func TestCompressedHistory(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		close    bool
		trailing int // bytes cut off the end after writing
		wantCut  bool
		wantAll  bool
	}{
		{"plain", "history.jsonl", true, 0, false, true},
		{"compressed", "history.jsonl.zst", true, 0, false, true},
		{"compressed, flushed, never closed", "history.jsonl.zst", false, 0, true, true},
		{"compressed, frame end cut off", "history.jsonl.zst", true, 3, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.file)
			want := recordSome(t, path, 2000, c.close)
			if c.trailing > 0 {
				b, _ := os.ReadFile(path)
				os.WriteFile(path, b[:len(b)-c.trailing], 0o644)
			}
			res, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if res.Truncated != c.wantCut {
				t.Errorf("ReadFile: truncated %v (%s), want %v", res.Truncated, res.TruncatedAt, c.wantCut)
			}
			// A block cut short is lost whole: what reads back is a
			// prefix of what was recorded.
			if len(res.Ops) == 0 || len(res.Ops) > len(want) || !reflect.DeepEqual(res.Ops, want[:len(res.Ops)]) || c.wantAll && len(res.Ops) != len(want) {
				t.Errorf("ReadFile: %d events, want the first of the %d recorded (all: %v)", len(res.Ops), len(want), c.wantAll)
			}
			lr, err := ReadLenient(path)
			if err != nil {
				t.Fatal(err)
			}
			if lr.Truncated != c.wantCut || lr.Bad != 0 || len(lr.Ops) != len(res.Ops) {
				t.Errorf("ReadLenient: truncated %v, %d bad, %d events; want %v, 0, %d", lr.Truncated, lr.Bad, len(lr.Ops), c.wantCut, len(res.Ops))
			}
		})
	}
}

// A file of neither format is not taken for a compressed one.
func TestOpenGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl.zst")
	os.WriteFile(path, []byte("\x28\xb5\x2f\xfdnot zstd at all"), 0o644)
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "corrupt from its start") {
		t.Errorf("a damaged zstd header: %v; want it called corrupt", err)
	}
	os.WriteFile(path, []byte("not json\n"), 0o644)
	if _, err := ReadFile(path); err == nil {
		t.Error("a file of text that is not events read as a history")
	}
}

// A history many batches long goes through the writer's bounded queue
// and its recycled buffers whole and in order.
func TestRecorderManyBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl.zst")
	n := (maxBatches + 4) * batchSize / 80 // events of about 100 bytes
	want := recordSome(t, path, n/2, true)
	res, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Truncated || !reflect.DeepEqual(res.Ops, want) {
		t.Fatalf("read %d events (truncated %v), recorded %d", len(res.Ops), res.Truncated, len(want))
	}
}

// Compressed data damaged in the middle (issue 34, item 7) is corrupt, not
// "ends early": every reader says so, and keeps only the events before
// the damage, which are a prefix of those recorded. A stream that merely
// ends early stays truncated and is not called corrupt.
func TestCorruptCompressedHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl.zst")
	want := recordSome(t, path, 20000, true)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A third of the way in, so that more than a whole block (128 KiB)
	// follows the damage: no damaged block header can reach the file's end.
	at := len(b) / 3
	for i := range 64 {
		b[at+i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !res.Corrupt || !strings.Contains(res.TruncatedAt, "corrupt") || strings.Contains(res.TruncatedAt, "ends early") {
		t.Errorf("ReadFile: truncated %v, corrupt %v (%s); want a corrupt history", res.Truncated, res.Corrupt, res.TruncatedAt)
	}
	if len(res.Ops) >= len(want) || !reflect.DeepEqual(res.Ops, want[:len(res.Ops)]) {
		t.Errorf("ReadFile: %d events of %d recorded, want a strict prefix", len(res.Ops), len(want))
	}
	if !strings.Contains(res.TruncatedAt, fmt.Sprintf("only the %d events", len(res.Ops))) {
		t.Errorf("ReadFile: %q does not say how far the readable prefix goes", res.TruncatedAt)
	}
	sc, err := OpenScanner(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, ok := sc.Next(); ok; _, ok = sc.Next() {
	}
	if r := sc.Result(); sc.Err() != nil || !r.Corrupt || r.TruncatedAt != res.TruncatedAt {
		t.Errorf("Scanner: err %v, %+v; want what ReadFile said", sc.Err(), r)
	}
	lr, err := ReadLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	if !lr.Truncated || !strings.Contains(lr.Corrupt, "corrupt") || len(lr.Ops) != len(res.Ops) {
		t.Errorf("ReadLenient: truncated %v, corrupt %q, %d events; want corrupt with %d", lr.Truncated, lr.Corrupt, len(lr.Ops), len(res.Ops))
	}
	ls, err := OpenLenient(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	for _, ok := ls.Next(); ok; _, ok = ls.Next() {
	}
	if !ls.Truncated() || ls.Corrupt() == "" || ls.Events() != len(res.Ops) {
		t.Errorf("LenientScanner: truncated %v, corrupt %q, %d events; want corrupt with %d", ls.Truncated(), ls.Corrupt(), ls.Events(), len(res.Ops))
	}

	// Cut short rather than damaged: truncated, not corrupt.
	if err := os.WriteFile(path, b[:at], 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := ReadFile(path); err != nil || res.Corrupt || !res.Truncated {
		t.Errorf("a stream cut short: err %v, %+v; want truncated, not corrupt", err, res)
	}
}

// A compressed stream cut before its first block (a harness killed before
// its first flush) is an empty truncated history, not a corrupt one.
func TestCompressedHistoryCutBeforeAnyBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl.zst")
	recordSome(t, path, 2000, true)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:12], 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ReadFile(path)
	if err != nil || !res.Truncated || res.Corrupt || len(res.Ops) != 0 {
		t.Fatalf("got %+v, %v; want an empty truncated history", res, err)
	}
}
