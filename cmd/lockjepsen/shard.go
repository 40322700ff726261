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

// take numbers the runs in the matrix's order and keeps the shard's share.
func (s shard) take(runs []matrixRun) []matrixRun {
	var out []matrixRun
	for i := range runs {
		runs[i].Index = i
		if s.Of == 0 || i%s.Of == s.Index-1 {
			out = append(out, runs[i])
		}
	}
	return out
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
		if prev, ok := seen[p.Shard.Index]; ok {
			return fmt.Errorf("%s and %s are both shard %s", prev, dirs[i], p.Shard)
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
			missing = append(missing, shard{i, of}.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("shard %s missing: give every shard's matrix directory", strings.Join(missing, ", "))
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
	res, err := mergeShards(dirs)
	if err != nil {
		return usageErr(stderr, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return usageErr(stderr, fmt.Errorf("--out %s: %v", outDir, err))
	}
	m := &matrixRunner{outDir: outDir, junit: junit, title: res.Title, stdout: stdout, stderr: stderr, o: o}
	if err := m.writeFiles(res); err != nil {
		fmt.Fprintf(stderr, "lockjepsen: harness failure: write the merged matrix: %v\n", err)
		return exitError{exitHarness}
	}
	m.print(res)
	if !res.Met {
		return exitError{exitNotMet}
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
