package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// Every run of --all lands in exactly one shard, whatever the split, and
// the shards of one split differ in size by one at most.
func TestShardsPartitionTheMatrix(t *testing.T) {
	all := func(shard string) []matrixRun {
		t.Helper()
		var mf matrixFlags
		fl := pflag.NewFlagSet("matrix", pflag.ContinueOnError)
		mf.flags(fl)
		if err := fl.Parse([]string{"--all", "--shard", shard}); err != nil {
			t.Fatal(err)
		}
		runs, err := mf.runs(fl)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	whole := all("")
	for _, n := range []int{1, 2, 3, 7} {
		seen := make([]int, len(whole))
		smallest, largest := len(whole), 0
		for i := 1; i <= n; i++ {
			runs := all(shard{Index: i, Of: n}.String())
			smallest, largest = min(smallest, len(runs)), max(largest, len(runs))
			for _, r := range runs {
				if whole[r.Index].Scenario != r.Scenario {
					t.Fatalf("shard %d/%d: run %d is %s, the whole matrix has %s there", i, n, r.Index, r.Scenario, whole[r.Index].Scenario)
				}
				seen[r.Index]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Errorf("%d shards: %s is in %d of them", n, whole[i].Scenario, c)
			}
		}
		if largest-smallest > 1 {
			t.Errorf("%d shards: sizes from %d to %d", n, smallest, largest)
		}
	}
}

func TestShardUsageErrors(t *testing.T) {
	store := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"matrix", "--all", "--shard", "0/3"}, "1 <= i <= n"},
		{[]string{"matrix", "--all", "--shard", "4/3"}, "1 <= i <= n"},
		{[]string{"matrix", "--all", "--shard", "two"}, "i/n"},
		{[]string{"matrix", "--scenarios", "baseline", "--shard", "2/2"}, "this shard has none"},
		{[]string{"report", "--merge", store}, "--out"},
		{[]string{"report", "--merge", "--out", filepath.Join(store, "m"), store}, "not a matrix directory"},
		{[]string{"report", "--out", store, store}, "go with --merge"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append(c.args, "--store", store)
			if c.args[0] == "report" {
				args = c.args
			}
			code, _, stderr := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, exitUsage, c.want, stderr)
			}
		})
	}
}

// Three shards, each with its own store as on its own CI machine, moved
// elsewhere before the merge as downloaded artifacts are, give the verdicts
// the whole matrix gives: each scenario's own (the scenario tests hold the
// whole matrix to them), in the matrix's order. The unsafe ones stop at
// their first violation: clients contend for one key all the time, so
// nearly every clock jump (+1.5 TTL) expires a live lease, and nearly
// every kill of the server without fsync forgets one.
func TestShardsMergeToTheWholeMatrix(t *testing.T) {
	redistest.RequireBinary(t)
	dir := t.TempDir()
	// Three unsafe scenarios, each stopping at its first violation within
	// a generous limit: with a 3 s limit a run under two busy loops met no
	// violation in time and its shard failed. Each ends in seconds when the
	// harness works.
	names := []string{"del-release", "clock-jump", "crash-no-fsync"}
	common := []string{"matrix", "--scenarios", strings.Join(names, ","), "--stop-on-first-violation",
		"--time-limit", "60s", "--recovery", "500ms", "--quiet"}
	var shardDirs []string
	for _, i := range []string{"1/3", "2/3", "3/3"} {
		machine := filepath.Join(dir, "machine"+i[:1])
		out := filepath.Join(machine, "store", "matrix", "m")
		if code, stdout, stderr := runCLI(t, append(common, "--shard", i, "--store", filepath.Join(machine, "store"), "--out", out)...); code != exitMet {
			t.Fatalf("shard %s: exit %d\n%s\n%s", i, code, stdout, stderr)
		}
		artifact := filepath.Join(dir, "artifacts", "shard"+i[:1])
		if err := os.MkdirAll(filepath.Dir(artifact), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(machine, artifact); err != nil {
			t.Fatal(err)
		}
		shardDirs = append(shardDirs, filepath.Join(artifact, "store", "matrix", "m"))
	}
	merged := filepath.Join(dir, "merged")
	junit := filepath.Join(dir, "junit.xml")
	slices.Reverse(shardDirs) // any order
	args := append([]string{"report", "--merge", "--out", merged, "--junit", junit, "--quiet"}, shardDirs...)
	if code, stdout, stderr := runCLI(t, args...); code != exitMet {
		t.Fatalf("merge: exit %d\n%s\n%s", code, stdout, stderr)
	}
	all := readMatrixResults(t, filepath.Join(merged, "results.json"))
	var want, got []string
	for _, n := range names {
		sc, _ := scenario.Get(n)
		want = append(want, n+"="+sc.Expect)
	}
	for _, r := range all.Runs {
		got = append(got, r.Scenario+"="+r.Verdict)
	}
	if !slices.Equal(got, want) || !all.Met {
		t.Fatalf("merged verdicts %v, the whole matrix's %v", got, want)
	}
	for _, r := range all.Runs {
		if _, err := runfile.FindHistory(r.Dir); err != nil {
			t.Errorf("%s: the merge did not find its run directory: %v", r.Scenario, err)
		}
	}
	if _, err := os.Stat(filepath.Join(merged, "matrix.html")); err != nil {
		t.Fatal(err)
	}
	if j := readJUnit(t, junit); j.Tests != 3 || j.Failures != 0 {
		t.Fatalf("junit: %+v", j)
	}
	// A shard left out is refused, naming it.
	code, _, stderr := runCLI(t, "report", "--merge", "--out", filepath.Join(dir, "partial"), shardDirs[0], shardDirs[1])
	if code != exitUsage || !strings.Contains(stderr, "shard 1/3 missing") {
		t.Fatalf("a missing shard: exit %d:\n%s", code, stderr)
	}
}

// handMadeShard writes a shard's matrix directory under root as `matrix
// --shard` leaves it, cut from the matrix of scenarios list: its share of
// the runs, each with a run directory holding a history beside the
// matrix directory (rel_dir), unless it is named in lose.
func handMadeShard(t *testing.T, root string, sh shard, list []string, lose ...string) string {
	t.Helper()
	dir := filepath.Join(root, "store", "matrix", "m")
	sh.Matrix = list
	res := matrixResults{Title: "hand-made", Shard: sh, Met: true}
	for i, name := range list {
		if i%sh.Of != sh.Index-1 {
			continue
		}
		run := filepath.Join(root, "store", name)
		if !slices.Contains(lose, name) {
			if err := os.MkdirAll(run, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, run, runfile.HistoryFile, "")
		}
		res.Runs = append(res.Runs, matrixRun{Scenario: name, Index: i, Dir: run, RelDir: relTo(dir, run), Verdict: "safe", Met: true, Expected: "safe"})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeRunJSON(t, filepath.Join(dir, runfile.ResultsFile), res)
	return dir
}

// Issue 34, item 8: shards cut from different lists of scenarios, or
// whose run directories are missing, are refused with exit 2, naming the
// mismatch or the directories; shards of one list, whole, merge.
func TestMergeRefusesShardsOfDifferentMatricesOrWithoutRuns(t *testing.T) {
	root := t.TempDir()
	a := []string{"baseline", "del-release"}
	b := []string{"baseline", "no-ttl"}
	one := handMadeShard(t, filepath.Join(root, "a1"), shard{Index: 1, Of: 2}, a)
	two := handMadeShard(t, filepath.Join(root, "a2"), shard{Index: 2, Of: 2}, a)
	other := handMadeShard(t, filepath.Join(root, "b2"), shard{Index: 2, Of: 2}, b)
	lost := handMadeShard(t, filepath.Join(root, "lost2"), shard{Index: 2, Of: 2}, a, "del-release")

	if merged, err := mergeShards([]string{one, two}); err != nil || len(merged.Runs) != 2 {
		t.Fatalf("shards of one matrix: %v", err)
	}
	code, _, stderr := runCLI(t, "report", "--merge", "--out", filepath.Join(root, "mixed"), one, other)
	if code != exitUsage || !strings.Contains(stderr, "different matrices") || !strings.Contains(stderr, "del-release") || !strings.Contains(stderr, "no-ttl") {
		t.Errorf("shards of different lists: exit %d:\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, "report", "--merge", "--out", filepath.Join(root, "partial"), one, lost)
	if code != exitUsage || !strings.Contains(stderr, "missing") || !strings.Contains(stderr, filepath.Join(root, "lost2", "store", "del-release")) {
		t.Errorf("a shard without its run directories: exit %d:\n%s", code, stderr)
	}
	for _, d := range []string{"mixed", "partial"} {
		if _, err := os.Stat(filepath.Join(root, d)); err == nil {
			t.Errorf("a refused merge wrote %s", d)
		}
	}
}

// Issue 53, item 14: a merge whose --out is one of its shards, whose
// --junit is a directory, or one of whose shards lists no runs or runs
// of another share, is refused with exit 2 before anything is written.
func TestMergeRefusesItsOwnShardsAndWrongShares(t *testing.T) {
	root := t.TempDir()
	a := []string{"baseline", "del-release", "no-ttl"}
	one := handMadeShard(t, filepath.Join(root, "a1"), shard{Index: 1, Of: 2}, a)
	two := handMadeShard(t, filepath.Join(root, "a2"), shard{Index: 2, Of: 2}, a)
	before, _ := os.ReadFile(filepath.Join(one, runfile.ResultsFile))

	empty := handMadeShard(t, filepath.Join(root, "e2"), shard{Index: 2, Of: 2}, a)
	var res matrixResults
	runfile.ReadJSON(filepath.Join(empty, runfile.ResultsFile), &res)
	res.Runs = nil
	writeRunJSON(t, filepath.Join(empty, runfile.ResultsFile), res)

	stolen := handMadeShard(t, filepath.Join(root, "s2"), shard{Index: 2, Of: 2}, a)
	runfile.ReadJSON(filepath.Join(stolen, runfile.ResultsFile), &res)
	res.Runs[0].Index = 0 // shard 1/2's run
	writeRunJSON(t, filepath.Join(stolen, runfile.ResultsFile), res)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", one, one, two}, "is one of the shards"},
		{[]string{"--out", filepath.Join(root, "m1"), "--junit", root, one, two}, "is a directory"},
		{[]string{"--out", filepath.Join(root, "m2"), one, empty}, "lacks run 1"},
		{[]string{"--out", filepath.Join(root, "m3"), one, stolen}, "not its share"},
	} {
		code, _, stderr := runCLI(t, append([]string{"report", "--merge"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", tc.args, code, stderr, tc.want)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(one, runfile.ResultsFile)); string(after) != string(before) {
		t.Error("a refused merge overwrote its own shard's results.json")
	}
}
