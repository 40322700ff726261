package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/runfile"
)

// handMadeRun writes, under a directory of the test's own, a finished run
// of the default configuration expecting safe: its history (compressed,
// as the harness stores it) is n holds of the lock taken one after
// another, each released well before its TTL, so that the checkers find it
// safe. No results.json: checking writes it.
func handMadeRun(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	w, err := history.CreateWriter(filepath.Join(dir, runfile.CompressedHistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	idx, now := int64(0), int64(time.Millisecond)
	emit := func(p int, typ history.Type, f string, v *history.Value) {
		op := history.Op{Index: idx, Time: now, Process: p, Type: typ, F: f, Key: "lock-0", Value: v}
		idx, now = idx+1, now+int64(100*time.Microsecond)
		b = append(history.AppendJSON(b[:0], &op), '\n')
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	cfg := harness.DefaultConfig()
	cfg.TTL = cfg.TTLOrDefault() // as a run records it
	for i := range n {
		p, tok := i%cfg.Clients, "t"+strings.Repeat("x", i%7)+time.Duration(i).String()
		emit(p, history.Invoke, history.Acquire, &history.Value{TTL: int64(cfg.TTL)})
		until := now + int64(cfg.TTL)
		emit(p, history.OK, history.Acquire, &history.Value{Token: tok, ValidUntil: &until})
		emit(p, history.Invoke, history.Release, &history.Value{Token: tok})
		emit(p, history.OK, history.Release, nil)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.TimeLimit, cfg.Recovery = time.Duration(now), 0
	writeRunJSON(t, filepath.Join(dir, harness.ConfigFile), cfg)
	end := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	writeRunJSON(t, filepath.Join(dir, harness.RunInfoFile), harness.RunInfo{Started: end.Add(-time.Duration(now)), Ended: end})
	return dir
}

func writeRunJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readResults(t *testing.T, path string) harness.Results {
	t.Helper()
	var r harness.Results
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || r.Results == nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return r
}

// Issue 34, item 6: a history emptied after the run (or damaged) must not
// turn the safe results.json reached on it whole into an unknown one of
// 0 ops. check refuses, exit 2, naming both readings, and leaves the file
// as it was; a history as whole as before still checks again.
func TestCheckKeepsTheBetterReading(t *testing.T) {
	run := handMadeRun(t, 300)
	resPath := filepath.Join(run, harness.ResultsFile)
	if code, out, errOut := runCLI(t, "check", run); code != exitMet {
		t.Fatalf("check of the whole run: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "check", run); code != exitMet {
		t.Fatalf("a second check of the same history: exit %d: %s", code, errOut)
	}
	good, err := os.ReadFile(resPath)
	if err != nil {
		t.Fatal(err)
	}
	r := readResults(t, resPath)
	if r.Verdict != "safe" || r.Ops != 600 || len(r.Linearizability.Files) == 0 {
		t.Fatalf("the whole run reads %s with %d ops and pictures %q, want safe with 600 and a picture", r.Verdict, r.Ops, r.Linearizability.Files)
	}
	picture := filepath.Join(run, r.Linearizability.Files[0])
	zst := filepath.Join(run, runfile.CompressedHistoryFile)
	whole, _ := os.ReadFile(zst)
	for name, damaged := range map[string][]byte{
		"emptied":      nil,
		"cut in two":   whole[:len(whole)/2],
		"corrupt tail": append(append([]byte(nil), whole[:len(whole)-40]...), make([]byte, 40)...),
	} {
		if err := os.WriteFile(zst, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, "check", run)
		if code != exitUsage || !strings.Contains(errOut, "refusing to overwrite") || !strings.Contains(errOut, "safe with 600 ops") {
			t.Errorf("%s history: exit %d, stderr %q; want exit 2 naming the stored reading", name, code, errOut)
		}
		if now, _ := os.ReadFile(resPath); string(now) != string(good) {
			t.Fatalf("%s history: results.json was overwritten (exit %d: %s)", name, code, errOut)
		}
		if _, err := os.Stat(picture); err != nil {
			t.Fatalf("%s history: the picture results.json lists is gone: %v", name, err)
		}
	}
	// Elsewhere, the worse reading is written and kept apart.
	other := t.TempDir()
	if code, _, errOut := runCLI(t, "check", "--out", other, run); code == exitUsage {
		t.Fatalf("check --out elsewhere: exit %d: %s", code, errOut)
	}
	if r := readResults(t, filepath.Join(other, harness.ResultsFile)); r.Ops >= 600 {
		t.Errorf("the reading beside has %d ops", r.Ops)
	}
}

// Issue 34, item 7: a history with 64 bytes flipped in the middle is
// called corrupt, not "ends early"; the results say how far the readable
// prefix goes, and a safe expectation is not met on it.
func TestCheckCallsACorruptHistoryCorrupt(t *testing.T) {
	run := handMadeRun(t, 20000)
	zst := filepath.Join(run, runfile.CompressedHistoryFile)
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
	code, out, errOut := runCLI(t, "check", run)
	if code != exitNotMet || !strings.Contains(errOut, "the history is corrupt") || strings.Contains(errOut, "ends early") {
		t.Fatalf("exit %d, stderr %q; want exit 1 warning of a corrupt history\n%s", code, errOut, out)
	}
	r := readResults(t, filepath.Join(run, harness.ResultsFile))
	if !r.Corrupt || r.MetExpectation || !strings.Contains(r.Incomplete, "corrupt") {
		t.Errorf("results: corrupt %v, met %v, incomplete %q; want corrupt, not met", r.Corrupt, r.MetExpectation, r.Incomplete)
	}
	// The prefix may end between an invoke and its completion.
	var events int
	if i := strings.Index(r.Truncated, "only the "); i >= 0 {
		fmt.Sscanf(r.Truncated[i:], "only the %d events", &events)
	}
	if r.Ops == 0 || r.Ops >= 40000 || events < 2*r.Ops || events > 2*r.Ops+1 || !strings.Contains(r.Truncated, "near byte") {
		t.Errorf("results: %d ops, truncated %q; want the prefix's events and where the damage is", r.Ops, r.Truncated)
	}
}

// A compressed history damaged before its first event has no prefix to
// check: bad input (exit 2) called corrupt, not a harness failure.
func TestCheckOfAHistoryCorruptFromItsStart(t *testing.T) {
	run := handMadeRun(t, 10)
	zst := filepath.Join(run, runfile.CompressedHistoryFile)
	if err := os.WriteFile(zst, []byte("\x28\xb5\x2f\xfdnot zstd at all, and long enough to be read"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, "check", run)
	if code != exitUsage || !strings.Contains(errOut, "corrupt history") || !strings.Contains(errOut, "corrupt from its start") {
		t.Fatalf("exit %d, stderr %q; want exit 2 calling the history corrupt", code, errOut)
	}
}

// Issue 53, item 15: check refuses, as bad input and before checking, a
// run whose results.json is a directory (exit 3 once the check could not
// replace it).
func TestCheckRefusesAResultsDirectory(t *testing.T) {
	run := handMadeRun(t, 200)
	os.Remove(filepath.Join(run, harness.ResultsFile))
	if err := os.Mkdir(filepath.Join(run, harness.ResultsFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, "check", run); code != exitUsage || !strings.Contains(errOut, "is not a file") {
		t.Fatalf("exit %d, stderr %q; want exit 2 saying results.json is not a file", code, errOut)
	}
}
