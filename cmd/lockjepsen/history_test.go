package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// A run's compressed history prints as JSON Lines; written back plain,
// and compressed again, it checks to the same verdict each time.
func TestHistoryCatAndCompress(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	shortRun(t, store)
	run := filepath.Join(store, "latest")
	zst := filepath.Join(run, runfile.CompressedHistoryFile)
	_, firstCheck, _ := runCLI(t, "check", run)
	if firstLine(firstCheck) == "" {
		t.Fatalf("check printed no verdict:\n%s", firstCheck)
	}
	code, text, errOut := runCLI(t, "history", "cat", run)
	if code != 0 || errOut != "" {
		t.Fatalf("history cat: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, line := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["type"] == nil {
			t.Fatalf("line %d is not an event: %q (%v)", i+1, line, err)
		}
	}
	if len(lines) < 10 {
		t.Fatalf("only %d events", len(lines))
	}
	st, _ := os.Stat(zst)
	if ratio := float64(len(text)) / float64(st.Size()); ratio < 5 {
		t.Errorf("the compressed history is only %.1f× smaller", ratio)
	}
	// Back to plain, as an earlier version wrote it.
	os.WriteFile(filepath.Join(run, runfile.HistoryFile), []byte(text), 0o644)
	os.Remove(zst)
	if code, out, _ := runCLI(t, "check", run); code != exitMet || firstLine(out) != firstLine(firstCheck) {
		t.Errorf("check of the plain history: exit %d\n%s\nwant\n%s", code, out, firstCheck)
	}
	if code, out, errOut := runCLI(t, "history", "compress", run); code != 0 || !strings.Contains(out, "×") {
		t.Fatalf("history compress: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(run, runfile.HistoryFile)); err == nil {
		t.Error("compress kept the plain file")
	}
	if code, again, _ := runCLI(t, "history", "cat", run); code != 0 || again != text {
		t.Errorf("the recompressed history differs (%d of %d bytes)", len(again), len(text))
	}

	for _, args := range [][]string{
		{"history", "cat", filepath.Join(store, "nonexistent")},
		{"history", "cat", t.TempDir()},
		{"history", "compress", run}, // already compressed
	} {
		if code, _, errOut := runCLI(t, args...); code != exitUsage || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "SAFE") || strings.HasPrefix(l, "UNSAFE") || strings.HasPrefix(l, "STUCK") || strings.HasPrefix(l, "UNKNOWN") {
			return l
		}
	}
	return ""
}

// Issue 53, items 15 and 17: history cat of a corrupt history prints the
// readable part and exits 2 saying so (it exited 0 with no warning);
// compress with both files present is refused as bad input (it failed
// with exit 3 after the work); an unknown subcommand of history is an
// error (it printed the help and exited 0).
func TestHistoryCommandsRefuseBadInput(t *testing.T) {
	run := handMadeRun(t, 2000)
	zst := filepath.Join(run, runfile.CompressedHistoryFile)
	b, err := os.ReadFile(zst)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "history", "frobnicate"); code != exitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("history frobnicate: exit %d, stderr %q; want exit 2", code, errOut)
	}
	os.WriteFile(filepath.Join(run, runfile.HistoryFile), []byte("{}\n"), 0o644)
	if code, _, errOut := runCLI(t, "history", "compress", run); code != exitUsage || !strings.Contains(errOut, "has both") {
		t.Errorf("compress with both files: exit %d, stderr %q; want exit 2", code, errOut)
	}
	os.Remove(filepath.Join(run, runfile.HistoryFile))
	for i := range 64 {
		b[len(b)/2+i] ^= 0xff
	}
	os.WriteFile(zst, b, 0o644)
	code, out, errOut := runCLI(t, "history", "cat", run)
	if code != exitUsage || !strings.Contains(errOut, "corrupt") || out == "" {
		t.Errorf("cat of a corrupt history: exit %d, %d bytes out, stderr %q; want the readable part and exit 2", code, len(out), errOut)
	}
}
