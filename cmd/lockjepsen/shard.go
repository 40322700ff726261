package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lockjepsen/lockjepsen/runfile"
)

// shard is a deterministic share of a matrix's runs: run i (counted from
// 0 in the matrix's order) belongs to shard i mod Of + 1. Every machine
// that computes the same matrix gives the same shares, so shards need no
// coordination beyond their numbers.
type shard struct {
	Index int `json:"index"`
	Of    int `json:"of"`
	// Matrix names every run of the whole matrix the shard was cut from,
	// in order: shards of different lists have the same numbers, and
	// merging them would make a matrix nobody ran. Absent in shards
	// written before it was recorded.
	Matrix []string `json:"matrix,omitempty"`
}

func (s shard) String() string {
	if s.Of == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Of)
}

// parseShard reads --shard i/n; "" is the whole matrix.
func parseShard(v string) (shard, error) {
	if v == "" {
		return shard{}, nil
	}
	a, b, ok := strings.Cut(v, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return shard{}, fmt.Errorf("--shard %q: want i/n with 1 <= i <= n, as 2/3", v)
	}
	return shard{Index: i, Of: n}, nil
}

// take numbers the runs in the matrix's order and keeps the shard's
// share; a shard records the whole matrix it was cut from.
func (s *shard) take(runs []matrixRun) []matrixRun {
	var out []matrixRun
	if s.Of > 0 {
		s.Matrix = nil
		for _, r := range runs {
			s.Matrix = append(s.Matrix, r.label())
		}
	}
	for i := range runs {
		runs[i].Index = i
		if s.Of == 0 || i%s.Of == s.Index-1 {
			out = append(out, runs[i])
		}
	}
	return out
}

// label names a run in a matrix's list: its scenario, or its test name
// for a run of the grid.
func (r *matrixRun) label() string {
	if r.Scenario != "" {
		return r.Scenario
	}
	return r.cfg.TestName()
}

// recordedLabel names a run read back from a results.json, which keeps
// its scenario or its grid coordinates but not its configuration.
func (r *matrixRun) recordedLabel() string {
	if r.Scenario != "" {
		return r.Scenario
	}
	return r.System + "/" + r.Lock + "/" + r.Faults
}

// mergeShards reads the results.json of each shard's matrix directory and
// combines them into one matrix: every shard of the same split must be
// there exactly once, and their runs are put back in the matrix's order.
// Run directories are found again relative to each shard's directory, so
// that shards made on other machines and copied here (CI artifacts) merge.
func mergeShards(dirs []string) (*matrixResults, error) {
	var parts []*matrixResults
	for _, d := range dirs {
		var res matrixResults
		if err := runfile.ReadJSON(filepath.Join(d, runfile.ResultsFile), &res); err != nil {
			return nil, fmt.Errorf("%s is not a matrix directory: %w", d, err)
		}
		for i := range res.Runs {
			res.Runs[i].Dir = relocate(d, res.Runs[i])
		}
		parts = append(parts, &res)
	}
	if err := checkShards(dirs, parts); err != nil {
		return nil, err
	}
	if err := checkRunDirs(dirs, parts); err != nil {
		return nil, err
	}
	merged := &matrixResults{Title: parts[0].Title, Started: parts[0].Started, Ended: parts[0].Ended, Budget: parts[0].Budget}
	for _, p := range parts {
		merged.Runs = append(merged.Runs, p.Runs...)
		merged.Interrupted = merged.Interrupted || p.Interrupted
		if p.Started.Before(merged.Started) {
			merged.Started = p.Started
		}
		if p.Ended.After(merged.Ended) {
			merged.Ended = p.Ended
		}
	}
	slices.SortStableFunc(merged.Runs, func(a, b matrixRun) int { return a.Index - b.Index })
	merged.tally()
	return merged, nil
}

// checkShards refuses a merge with a shard missing, given twice, or from
// another split.
func checkShards(dirs []string, parts []*matrixResults) error {
	of := parts[0].Shard.Of
	seen := map[int]string{}
	for i, p := range parts {
		if p.Shard.Of != of {
			return fmt.Errorf("%s is shard %s but %s is shard %s: not the same split", dirs[i], p.Shard, dirs[0], parts[0].Shard)
		}
		if err := sameMatrix(dirs[0], dirs[i], parts[0].Shard, p.Shard); err != nil {
			return err
		}
		if prev, ok := seen[p.Shard.Index]; ok {
			return fmt.Errorf("%s and %s are both shard %s", prev, dirs[i], p.Shard)
		}
		if err := p.holdsItsShare(dirs[i]); err != nil {
			return err
		}
		seen[p.Shard.Index] = dirs[i]
	}
	if of == 0 {
		if len(parts) > 1 {
			return errors.New("these matrices were not run with --shard: there is nothing to merge")
		}
		return nil
	}
	var missing []string
	for i := 1; i <= of; i++ {
		if _, ok := seen[i]; !ok {
			missing = append(missing, shard{Index: i, Of: of}.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("shard %s missing: give every shard's matrix directory", strings.Join(missing, ", "))
	}
	return nil
}

// holdsItsShare refuses a shard whose runs are not its share of the
// matrix's list (every of-th run from its index): a shard listing no
// runs, another shard's run, or one run twice merged as if whole. An
// interrupted shard may lack the runs it never reached.
func (p *matrixResults) holdsItsShare(dir string) error {
	s := p.Shard
	if s.Of == 0 {
		return nil
	}
	seen := map[int]bool{}
	for _, r := range p.Runs {
		if r.Index < 0 || r.Index >= len(s.Matrix) || r.Index%s.Of != s.Index-1 || seen[r.Index] {
			return fmt.Errorf("%s is shard %s, but lists run %d (%s), which is not its share of the matrix or is listed twice", dir, s, r.Index, r.label())
		}
		seen[r.Index] = true
	}
	for i := s.Index - 1; i < len(s.Matrix) && !p.Interrupted; i += s.Of {
		if !seen[i] {
			return fmt.Errorf("%s is shard %s, but lacks run %d (%s) of its share, and was not interrupted", dir, s, i, s.Matrix[i])
		}
	}
	return nil
}

// sameMatrix refuses shards a and b (in directories da and db) cut from
// different lists of runs, naming the first run where the lists differ.
func sameMatrix(da, db string, a, b shard) error {
	if slices.Equal(a.Matrix, b.Matrix) {
		return nil
	}
	at := func(m []string, i int) string {
		if i < len(m) {
			return m[i]
		}
		return "nothing"
	}
	i := 0
	for i < len(a.Matrix) && i < len(b.Matrix) && a.Matrix[i] == b.Matrix[i] {
		i++
	}
	return fmt.Errorf("%s (shard %s) and %s (shard %s) were cut from different matrices: run %d is %s in the first and %s in the second (lists %s and %s); merge shards of one matrix command",
		da, a, db, b, i+1, at(a.Matrix, i), at(b.Matrix, i), listOf(a.Matrix), listOf(b.Matrix))
}

// listOf is a matrix's list of runs for a message, shortened when long.
func listOf(m []string) string {
	if len(m) == 0 {
		return "(not recorded)"
	}
	if len(m) > 6 {
		return fmt.Sprintf("%s, … (%d runs)", strings.Join(m[:6], ", "), len(m))
	}
	return strings.Join(m, ", ")
}

// checkRunDirs refuses a merge in which a run that has a verdict has no
// run directory with a history: a merged page of it would show a verdict
// with nothing behind it. Skipped runs never had one, and a run the
// harness failed may have stopped before its history; its error is shown.
func checkRunDirs(dirs []string, parts []*matrixResults) error {
	var missing []string
	for i, p := range parts {
		for _, r := range p.Runs {
			if r.Verdict == stateSkipped || r.Verdict == stateError {
				continue
			}
			if !runfile.HasHistory(r.Dir) {
				missing = append(missing, fmt.Sprintf("%s (%s, of %s)", r.Dir, r.recordedLabel(), dirs[i]))
			}
		}
	}
	if len(missing) > 0 {
		n := len(missing)
		if n > 5 { // a shard copied without its store misses them all
			missing = append(missing[:5], "…")
		}
		return fmt.Errorf("%d run directories of the shards are missing or hold no history: %s; copy them with the shards (each where its rel_dir says, beside the matrix directory)",
			n, strings.Join(missing, ", "))
	}
	return nil
}

// relocate finds a shard's run directory: where it was recorded, or, for
// a shard copied from another machine, at its recorded place relative to
// the shard's matrix directory.
func relocate(shardDir string, r matrixRun) string {
	if r.Dir != "" {
		if runfile.HasHistory(r.Dir) {
			return r.Dir
		}
	}
	if r.RelDir != "" {
		d := filepath.Join(shardDir, filepath.FromSlash(r.RelDir))
		if runfile.HasHistory(d) {
			return absDir(d)
		}
	}
	return r.Dir
}

// writeMerged writes the merged matrix's page, results.json and JUnit XML.
func writeMerged(dirs []string, outDir, junit string, o output, stdout, stderr io.Writer) error {
	if err := mergeTargets(dirs, outDir, junit); err != nil {
		return usageErr(stderr, err)
	}
	res, err := mergeShards(dirs)
	if err != nil {
		return usageErr(stderr, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return usageErr(stderr, fmt.Errorf("--out %s: %v", outDir, err))
	}
	m := &matrixRunner{outDir: outDir, junit: junit, title: res.Title, stdout: stdout, stderr: stderr, o: o}
	if err := m.writeFiles(res); err != nil {
		return outputFailure(stderr, "write the merged matrix", err)
	}
	m.print(res)
	if !res.Met {
		return exitError{code: exitNotMet}
	}
	return nil
}

// relTo is dir relative to base, slash-separated; "" when there is none.
func relTo(base, dir string) string {
	if dir == "" {
		return ""
	}
	b, err1 := filepath.Abs(base)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return ""
	}
	rel, err := filepath.Rel(b, d)
	if err != nil {
		return ""
	}
	return filepath.ToSlash(rel)
}

// mergeTargets refuses a merge that would write over one of its own
// shards (--out naming an input overwrote its results.json) or a JUnit
// file that is a directory, before anything is read or written.
func mergeTargets(dirs []string, outDir, junit string) error {
	out, _ := filepath.Abs(outDir)
	for _, d := range dirs {
		if in, _ := filepath.Abs(d); in == out {
			return fmt.Errorf("--out %s is one of the shards to merge: give a directory of its own", outDir)
		}
	}
	if st, err := os.Stat(junit); junit != "" && err == nil && st.IsDir() {
		return fmt.Errorf("--junit %s is a directory: give a file", junit)
	}
	return nil
}
