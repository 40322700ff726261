package reports

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/internal/atomicfile"
)

// runSummary is one run as the matrix and the index show it: its
// configuration and verdict, without the history.
type runSummary struct {
	Dir      string
	Href     string // link to its report
	Files    string // link to its directory
	Test     string
	Started  time.Time
	When     string
	System   string
	Lock     string
	Workload string
	Nemesis  string
	Faults   []string
	Seed     int64
	Verdict  string // safe, unsafe, stuck, unknown, not checked
	VClass   string
	Headline string
	// Violations is the count of mutual-exclusion violations.
	Violations int
	Lost       int // resource: lost updates + interleaved writes
	Unavail    string
	UnavailNs  int64
	Expect     string
	Met        string // "met", "not met", "" (not checked)
	Notes      []string
}

func summarize(rf *runFiles) runSummary {
	s := runSummary{Dir: rf.dir, Started: rf.started(), Verdict: rf.verdict()}
	if !s.Started.IsZero() {
		s.When = s.Started.UTC().Format("2006-01-02 15:04:05")
	}
	s.VClass = strings.ReplaceAll(s.Verdict, " ", "-")
	if c := rf.cfg; c != nil {
		s.Test = testName(c)
		s.System, s.Lock, s.Workload, s.Nemesis, s.Faults, s.Seed = c.System, c.Lock, c.Workload, c.nemesisLabel(), c.Nemesis, c.Seed
		s.Expect = c.Expect
	} else {
		s.Test = filepath.Base(filepath.Dir(rf.dir))
		s.System, s.Lock, s.Workload, s.Nemesis = "?", "?", "?", "?"
	}
	if r := rf.res; r != nil && r.Results != nil {
		if lines := r.Summary(); len(lines) > 0 {
			s.Headline = lines[0]
		}
		s.Violations = r.Violations
		if r.Resource != nil {
			s.Lost = r.Resource.LostUpdates + r.Resource.Duplicates
		}
		if l := r.Liveness; l != nil && l.Longest != nil {
			s.UnavailNs = l.Longest.Duration
			s.Unavail = fmtD(l.Longest.Duration)
			if l.Stuck {
				s.Unavail += " (stuck)"
			}
		}
		if r.Expect != "" {
			s.Expect = r.Expect
		}
		s.Met = "not met"
		if r.MetExpectation {
			s.Met = "met"
		}
		if r.Incomplete != "" {
			s.Notes = append(s.Notes, "incomplete")
		}
		if len(r.Errors) > 0 {
			s.Notes = append(s.Notes, "harness errors")
		}
	} else {
		s.Headline = "not checked: no results.json (run lockjepsen check)"
		if rf.info == nil {
			s.Notes = append(s.Notes, "unfinished")
		}
	}
	return s
}

// matrixPage is the matrix template's data.
type matrixPage struct {
	Title     string
	Generated string
	Cols      []string
	Rows      []matrixRow
	Runs      []runSummary
	Counts    map[string]int
	Back      string // link back to the index (serve only)
	RowHeader string
}

type matrixRow struct {
	Label string
	Cells []matrixCell
}

type matrixCell struct {
	Runs  []runSummary
	Class string // the worst verdict of its runs
}

var verdictRank = map[string]int{checker.VerdictSafe: 1, "not checked": 0, checker.VerdictUnknown: 2, checker.VerdictStuck: 3, checker.VerdictUnsafe: 4}

// buildMatrix arranges runs in a grid: a row per system × lock (× workload
// when runs differ in it), a column per fault set.
func buildMatrix(runs []runSummary, title string) *matrixPage {
	mp := &matrixPage{Title: title, Generated: time.Now().UTC().Format("2006-01-02 15:04:05 UTC"), Counts: map[string]int{}}
	workloads := map[string]bool{}
	for _, r := range runs {
		workloads[r.Workload] = true
	}
	rowKey := func(r runSummary) string {
		k := r.System + " · " + r.Lock
		if len(workloads) > 1 {
			k += " · " + r.Workload
		}
		return k
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Started.Before(runs[j].Started) })
	var rows, cols []string
	seenR, seenC := map[string]bool{}, map[string]bool{}
	for _, r := range runs {
		if k := rowKey(r); !seenR[k] {
			seenR[k] = true
			rows = append(rows, k)
		}
		if !seenC[r.Nemesis] {
			seenC[r.Nemesis] = true
			cols = append(cols, r.Nemesis)
		}
		mp.Counts[r.Verdict]++
	}
	sort.Strings(rows)
	sort.SliceStable(cols, func(i, j int) bool {
		// No faults first, then single faults, then combinations.
		ci, cj := strings.Count(cols[i], ","), strings.Count(cols[j], ",")
		if (cols[i] == "none") != (cols[j] == "none") {
			return cols[i] == "none"
		}
		if ci != cj {
			return ci < cj
		}
		return cols[i] < cols[j]
	})
	mp.Cols = cols
	mp.RowHeader = "system · lock"
	if len(workloads) > 1 {
		mp.RowHeader += " · workload"
	}
	ci := map[string]int{}
	for i, c := range cols {
		ci[c] = i
	}
	ri := map[string]int{}
	for i, r := range rows {
		ri[r] = i
		mp.Rows = append(mp.Rows, matrixRow{Label: r, Cells: make([]matrixCell, len(cols))})
	}
	for _, r := range runs {
		c := &mp.Rows[ri[rowKey(r)]].Cells[ci[r.Nemesis]]
		c.Runs = append(c.Runs, r)
		if c.Class == "" || verdictRank[r.Verdict] > verdictRank[c.Class] {
			c.Class = r.Verdict
		}
	}
	mp.Runs = runs
	return mp
}

// WriteMatrix renders one page summarizing several runs: a grid with a row
// per system × lock and a column per fault set; each cell links to its
// runs' reports and shows the verdict, the violation count, the longest
// unavailability and whether the run met its expectation. A run without
// report.html gets one first, so that every link works.
func WriteMatrix(path string, runDirs []string, title string) error {
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	var runs []runSummary
	for _, d := range runDirs {
		if !isRunDir(d) {
			return fmt.Errorf("%s is not a lockjepsen run directory", d)
		}
		rf := loadMeta(d)
		s := summarize(rf)
		report := filepath.Join(d, ReportFile)
		if st, err := os.Stat(report); err != nil || st.ModTime().Before(rf.modTime) {
			if _, err := WriteRun(d); err != nil {
				return err
			}
		}
		abs, err := filepath.Abs(report)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(base, abs)
		if err != nil {
			rel = abs
		}
		s.Href = filepath.ToSlash(rel)
		s.Files = filepath.ToSlash(filepath.Dir(rel)) + "/"
		runs = append(runs, s)
	}
	if title == "" {
		title = "lockjepsen matrix"
	}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, "matrix.html.tmpl", buildMatrix(runs, title)); err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, buf.Bytes())
}
