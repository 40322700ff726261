package reports_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// A run whose compressed history is damaged in the middle (issue 34, item
// 7) renders, and its page calls the history corrupt rather than cut by a
// harness that died mid-write.
func TestWriteRunCorruptHistory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "corrupt", "20261129T090000.000Z")
	var ops []history.Op
	tm := int64(1000)
	for i := range 20000 {
		p, tok := i%3, fmt.Sprintf("p%d.%d", i%3, i)
		ops = append(ops,
			history.Op{Time: tm, Process: p, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
			history.Op{Time: tm + 100_000, Process: p, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: tok, ValidUntil: history.I64(tm + 4e8)}},
			history.Op{Time: tm + 200_000, Process: p, Type: history.Invoke, F: history.Release, Key: "lock-0", Value: &history.Value{Token: tok}},
			history.Op{Time: tm + 300_000, Process: p, Type: history.OK, F: history.Release, Key: "lock-0"})
		tm += 400_000
	}
	writeRunFiles(t, dir, fixtureConfig("corrupt"), fixtureInfo(), ops)
	plain := filepath.Join(dir, harness.HistoryFile)
	text, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	w, err := history.CreateWriter(filepath.Join(dir, runfile.CompressedHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(text); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(plain)
	zst := filepath.Join(dir, runfile.CompressedHistoryFile)
	b, err := os.ReadFile(zst)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		b[len(b)/3+i] ^= 0xff
	}
	if err := os.WriteFile(zst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	writePage(t, dir, []string{"Corrupt history", "the compressed data is corrupt", "near byte"})
}
