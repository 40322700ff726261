package history

import (
	"os"
	"path/filepath"
	"reflect"
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
	if _, err := ReadFile(path); err == nil {
		t.Error("a damaged zstd header read as a history")
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
