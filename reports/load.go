package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lockjepsen/lockjepsen/runfile"
)

// ReportFile is the page WriteRun writes in a run directory.
const ReportFile = "report.html"

var (
	// runMarkers are the files of which one makes a directory a run's.
	runMarkers = []string{runfile.CompressedHistoryFile, runfile.HistoryFile, runfile.ConfigFile}
	// runInputs are the files a report is drawn from: a report older
	// than any of them is stale.
	runInputs = []string{runfile.CompressedHistoryFile, runfile.HistoryFile, runfile.ConfigFile, runfile.RunInfoFile, runfile.ResultsFile}
)

// runConfig is config.json as the harness wrote it: the settings, and
// the scripted steps, of which the report only tells whether there are
// any (their type lives with the faults, which the report does not link).
type runConfig struct {
	runfile.Settings
	Script json.RawMessage `json:"script,omitempty"`
}

// nemesisLabel is the fault list as a reader names it ("none" when empty).
func (c *runConfig) nemesisLabel() string {
	if c == nil {
		return "?"
	}
	if c.ScriptName != "" {
		return c.ScriptName
	}
	if len(c.Script) > 0 && string(c.Script) != "null" {
		return "script"
	}
	if len(c.Nemesis) == 0 {
		return "none"
	}
	s := ""
	for i, n := range c.Nemesis {
		if i > 0 {
			s += ","
		}
		s += n
	}
	return s
}

// runInfo is run.json.
type runInfo = runfile.RunInfo

// runResults is results.json.
type runResults = runfile.Results

// runFiles is what a run directory holds, each part optional.
type runFiles struct {
	dir  string
	cfg  *runConfig
	info *runInfo
	res  *runResults
	// problems reading the files, for the reader of the report.
	cfgErr, infoErr, resErr error
	modTime                 time.Time
}

// loadMeta reads config.json, run.json and results.json (not the history).
func loadMeta(dir string) *runFiles {
	rf := &runFiles{dir: dir}
	var cfg runConfig
	if err := readJSON(filepath.Join(dir, runfile.ConfigFile), &cfg); err == nil {
		rf.cfg = &cfg
	} else {
		rf.cfgErr = err
	}
	var info runInfo
	if err := readJSON(filepath.Join(dir, runfile.RunInfoFile), &info); err == nil {
		rf.info = &info
	} else {
		rf.infoErr = err
	}
	var res runResults
	if err := readJSON(filepath.Join(dir, runfile.ResultsFile), &res); err == nil && res.Results != nil {
		rf.res = &res
	} else if err != nil {
		rf.resErr = err
	} else {
		rf.resErr = fmt.Errorf("%s has no checker results", runfile.ResultsFile)
	}
	for _, f := range runInputs {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.ModTime().After(rf.modTime) {
			rf.modTime = st.ModTime()
		}
	}
	return rf
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

func missing(err error) bool { return errors.Is(err, os.ErrNotExist) }

// verdict is the run's verdict, "not checked" without results.
func (rf *runFiles) verdict() string {
	if rf.res == nil {
		return "not checked"
	}
	if rf.res.Verdict == "" {
		return "not checked"
	}
	return rf.res.Verdict
}

// troubles are the harness's errors and the lock's panics: results.json's
// once the run was checked, else what run.json recorded.
func (rf *runFiles) troubles() (errs, panics []string) {
	switch {
	case rf.res != nil:
		return rf.res.Errors, rf.res.ClientPanics
	case rf.info != nil:
		return rf.info.Errors, rf.info.ClientPanics
	}
	return nil, nil
}

// started is when the run began: run.json, else the directory's name,
// else its modification time.
func (rf *runFiles) started() time.Time {
	if rf.info != nil && !rf.info.Started.IsZero() {
		return rf.info.Started
	}
	base := filepath.Base(rf.dir)
	if len(base) >= len("20060102T150405.000Z") {
		if t, err := time.Parse("20060102T150405.000Z", base[:len("20060102T150405.000Z")]); err == nil {
			return t
		}
	}
	return rf.modTime
}
