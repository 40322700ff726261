package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// shrink refuses a safe run with exit 2 and keeps nothing; replay and
// shrink refuse what is not a run directory.
func TestShrinkAndReplayRefuse(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	if code, out, stderr := runCLI(t, "test", "--time-limit", "1s", "--recovery", "0s", "--store", store, "--quiet"); code != exitMet {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	latest := filepath.Join(store, "latest")
	code, _, stderr := runCLI(t, "shrink", latest)
	if code != exitUsage || !strings.Contains(stderr, "nothing to shrink: the run was safe") {
		t.Errorf("shrink of a safe run: exit %d, %q", code, stderr)
	}
	entries, _ := os.ReadDir(store)
	if len(entries) != 2 { // the test's directory and latest
		t.Errorf("shrink of a safe run left entries in the store: %v", entries)
	}
	// A run whose harness failed before the checkers ran has a history
	// but no verdict: said as such, not as a missing file.
	unfinished := t.TempDir()
	for _, name := range []string{runfile.ConfigFile, "history.jsonl.zst"} {
		if b, err := os.ReadFile(filepath.Join(latest, name)); err == nil {
			_ = os.WriteFile(filepath.Join(unfinished, name), b, 0o644)
		}
	}
	if code, _, stderr := runCLI(t, "shrink", unfinished); code != exitUsage || !strings.Contains(stderr, "did not finish (it has no results.json") {
		t.Errorf("shrink of an unfinished run: exit %d, %q", code, stderr)
	}
	for _, cmd := range []string{"shrink", "replay"} {
		if code, _, stderr := runCLI(t, cmd, t.TempDir()); code != exitUsage || !strings.Contains(stderr, "not a run directory") {
			t.Errorf("%s of an empty directory: exit %d, %q", cmd, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "shrink", latest, "--tries", "3/2"); code != exitUsage || !strings.Contains(stderr, "--tries") {
		t.Errorf("shrink --tries 3/2: exit %d, %q", code, stderr)
	}
}

// test --replay reruns a stored run with its settings and executed fault
// schedule, by the replay command's path: the replay's run.json names the
// original and its schedule plays the original's faults in order. Flags
// that would change the run, and a run directory that is missing or
// cannot be replayed, are refused with exit 2 and store nothing.
func TestTestReplay(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	code, out, stderr := runCLI(t, "test", "--nemesis", "pause,partition", "--nemesis-interval", "300ms", "--fault-duration", "100ms",
		"--time-limit", "3s", "--recovery", "0s", "--expect", "any", "--store", store, "--json")
	if code != exitMet {
		t.Fatalf("original run: exit %d\n%s\n%s", code, out, stderr)
	}
	orig := jsonDir(t, out)
	latest := filepath.Join(store, "latest")
	code, out, stderr = runCLI(t, "test", "--replay", latest, "--json")
	if code != exitMet {
		t.Fatalf("test --replay: exit %d\n%s\n%s", code, out, stderr)
	}
	replayed := jsonDir(t, out)
	if info := harnesstest.ReadRunInfo(t, replayed); info.ReplayOf != orig {
		t.Errorf("run.json replay_of = %q, want the original %q", info.ReplayOf, orig)
	}
	a, b := readFaults(t, orig), readFaults(t, replayed)
	// Every fault the original took up before its last second must come
	// back; one nearer the end may fall on either side of the deadline.
	due := 0
	for _, f := range a {
		if f.At < 2*time.Second {
			due++
		}
	}
	if due < 2 || len(b) < due || len(b) > len(a) {
		t.Fatalf("the original executed %d faults (%d in its first 2 s), the replay %d", len(a), due, len(b))
	}
	for i := range b {
		if a[i].Fault != b[i].Fault || !slices.Equal(a[i].Hit, b[i].Hit) || a[i].For != b[i].For {
			t.Errorf("fault %d: replayed %s on %v for %s, recorded %s on %v for %s", i+1, b[i].Fault, b[i].Hit, b[i].For, a[i].Fault, a[i].Hit, a[i].For)
		}
	}

	config := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(config, []byte("clients: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// noSchedule is a finished run stored before schedules were;
	// unfinished, one whose harness failed before the checkers ran.
	noSchedule, unfinished := t.TempDir(), t.TempDir()
	for _, name := range []string{runfile.ConfigFile, "history.jsonl.zst", runfile.ResultsFile} {
		b, err := os.ReadFile(filepath.Join(orig, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(noSchedule, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if name != runfile.ResultsFile {
			if err := os.WriteFile(filepath.Join(unfinished, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := storedRuns(t, store)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--replay", latest, "--clients", "2"}, "--clients would change them"},
		{[]string{"--replay", latest, "--nemesis", "kill", "--seed", "7"}, "--nemesis, --seed would change them"},
		{[]string{"--replay", latest, "--config", config}, "--config would change them"},
		{[]string{"--replay", ""}, "--replay needs a stored run directory"},
		{[]string{"--replay", filepath.Join(store, "nothing")}, "no such run directory"},
		{[]string{"--replay", t.TempDir()}, "not a run directory"},
		{[]string{"--replay", noSchedule}, "has no schedule.json"},
		{[]string{"--replay", unfinished}, "did not finish (it has no results.json"},
	} {
		code, _, stderr := runCLI(t, append([]string{"test", "--store", store}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("test %v: exit %d, %q; want exit %d saying %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
	if after := storedRuns(t, store); after != before {
		t.Errorf("the refused replays stored runs: %d runs before, %d after", before, after)
	}
}

func jsonDir(t *testing.T, stdout string) string {
	t.Helper()
	var v struct {
		Dir string `json:"dir"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.Dir == "" {
		t.Fatalf("--json output without a run directory (%v): %s", err, stdout)
	}
	dir, err := filepath.EvalSymlinks(v.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func readFaults(t *testing.T, dir string) []runfile.ScheduledFault {
	t.Helper()
	s, err := runfile.ReadSchedule(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s.Faults
}

// storedRuns counts the run directories in a store.
func storedRuns(t *testing.T, store string) int {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(store, "*", "*", runfile.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// replay --times says, for each replay, how many of the recorded faults it
// applied, and why a replay that applied fewer may not have shown the
// violation; shrink with no budget left says so. The original is unsafe by
// construction: the single server is killed right after a grant
// (--after-acquire, aimed at the holder) and restarts at once without the
// key, while the holder holds for 1-1.5 s of its 2 s lease and nine other
// clients try the key every few milliseconds. Then its kill is made to
// wait for a grant by two nodes, which a single server never makes: the
// replays apply none of it, stay safe, and say so.
func TestReplayTimesSaysWhichFaultsApplied(t *testing.T) {
	redistest.RequireBinary(t)
	store := t.TempDir()
	code, out, stderr := runCLI(t, "test", "--nemesis", "kill", "--after-acquire", "--targets", "holder",
		"--hold", "1s..1500ms", "--ttl", "2s", "--time-limit", "2s", "--recovery", "0s",
		"--stop-on-first-violation", "--expect", "unsafe", "--store", store, "--json")
	if code != exitMet {
		t.Fatalf("original run: exit %d\n%s\n%s", code, out, stderr)
	}
	orig := jsonDir(t, out)
	code, out, stderr = runCLI(t, "replay", orig, "--times", "2")
	if code != exitMet || !strings.Contains(out, "reproduced 2 of 2") || strings.Count(out, "1 of 1 recorded faults applied\n") != 2 {
		t.Fatalf("replay --times 2: exit %d, want %d, two replays with their one fault and the violation\n%s\n%s", code, exitMet, out, stderr)
	}
	// A budget spent before the original's tries: said so, exit 2, and
	// nothing kept (rather than "harness failure: search stopped").
	before := storedRuns(t, store)
	code, _, stderr = runCLI(t, "shrink", orig, "--budget", "1ns")
	if code != exitUsage || !strings.Contains(stderr, "the search stopped before the original run's tries were done (budget of 1ns spent): nothing was kept") {
		t.Errorf("shrink --budget 1ns: exit %d, want %d saying the budget was spent first: %s", code, exitUsage, stderr)
	}
	if after := storedRuns(t, store); after != before {
		t.Errorf("shrink --budget 1ns stored runs: %d before, %d after", before, after)
	}

	s, err := runfile.ReadSchedule(orig)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 1 || !s.Faults[0].AfterGrant {
		t.Fatalf("the original's schedule: %+v, want one kill right after a grant", s.Faults)
	}
	s.Faults[0].LeaseNodes = 2
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orig, runfile.ScheduleFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "replay", orig, "--times", "2")
	if code != exitNotMet || !strings.Contains(out, "reproduced 0 of 2") ||
		strings.Count(out, "0 of 1 recorded faults applied: the rest were still waiting when the run ended") != 2 {
		t.Fatalf("replay --times 2 of a kill that finds no grant of its kind: exit %d, want %d, saying that no fault was applied\n%s\n%s", code, exitNotMet, out, stderr)
	}
}
