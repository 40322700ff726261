package history

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The scanner reads what ReadFile reads, from both formats, and reports a
// damaged last line and a malformed one the same way.
func TestScannerMatchesReadFile(t *testing.T) {
	good := `{"index":0,"time":1,"process":0,"type":"invoke","f":"acquire","key":"k"}` + "\n" +
		`{"index":1,"time":2,"process":0,"type":"fail","f":"acquire","key":"k"}` + "\n"
	cases := []struct {
		name      string
		content   string
		wantErr   bool
		truncated bool
	}{
		{"clean", good, false, false},
		{"damaged last line", good + `{"index":2,"ti`, false, true},
		{"malformed middle line", good + "{nope\n" + good, true, false},
		{"index out of order", good + good, true, false},
		{"empty", "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.jsonl")
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			want, wantErr := ReadFile(path)
			s, err := OpenScanner(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []Op
			for op, ok := s.Next(); ok; op, ok = s.Next() {
				got = append(got, op)
			}
			if (s.Err() != nil) != c.wantErr || (wantErr != nil) != c.wantErr {
				t.Fatalf("scanner err %v, ReadFile err %v, want error %v", s.Err(), wantErr, c.wantErr)
			}
			if c.wantErr {
				var a, b *FormatError
				if !errors.As(s.Err(), &a) || !errors.As(wantErr, &b) || *a != *b {
					t.Fatalf("scanner %v, ReadFile %v: want the same FormatError", s.Err(), wantErr)
				}
				return
			}
			if !reflect.DeepEqual(got, want.Ops) || s.Events() != len(want.Ops) {
				t.Fatalf("scanner read %d events, ReadFile %d", len(got), len(want.Ops))
			}
			if tr, at := s.Truncated(); tr != c.truncated || tr != want.Truncated || at != want.TruncatedAt {
				t.Fatalf("truncated %v %q, ReadFile %v %q, want %v", tr, at, want.Truncated, want.TruncatedAt, c.truncated)
			}
		})
	}
}

// A compressed history flushed but never closed scans as truncated, with
// every flushed event.
func TestScannerCompressedCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl.zst")
	want := recordSome(t, path, 500, false)
	s, err := OpenScanner(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for op, ok := s.Next(); ok; op, ok = s.Next() {
		if !reflect.DeepEqual(op, want[n]) {
			t.Fatalf("event %d: %v, want %v", n, op, want[n])
		}
		n++
	}
	if tr, _ := s.Truncated(); s.Err() != nil || n != len(want) || !tr {
		t.Fatalf("read %d of %d, err %v, truncated %v", n, len(want), s.Err(), tr)
	}
}
