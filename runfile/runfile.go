// Package runfile owns the files of a run directory: their names, and the
// formats of run.json, results.json, config.json's settings and
// nodes.json. The harness writes them and the reports read them back, so
// neither mirrors the other.
package runfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/internal/atomicfile"
)

// Names of a store's own entries, beside the tests' directories.
const (
	// LatestLink is the symlink to the newest finished run.
	LatestLink = "latest"
	// MatrixDir holds the matrix pages of `lockjepsen matrix`.
	MatrixDir = "matrix"
	// ReviewDir holds the pages of `lockjepsen review`.
	ReviewDir = "review"
)

// ReservedNames cannot name a test: a test of that name would be stored
// where the store keeps its own entries (store/latest would point at
// itself).
var ReservedNames = []string{LatestLink, MatrixDir, ReviewDir}

// Reserved reports whether a test may not be called name.
func Reserved(name string) bool { return slices.Contains(ReservedNames, name) }

// Files of a run directory.
const (
	// CompressedHistoryFile is the history a run writes: the JSON Lines
	// format as one zstd stream, about ten times smaller (`lockjepsen
	// history cat` prints it). HistoryFile is the same format uncompressed,
	// which runs of earlier versions wrote and every reader still takes.
	CompressedHistoryFile = HistoryFile + ".zst"
	HistoryFile           = "history.jsonl"
	ResultsFile           = "results.json"
	ConfigFile            = "config.json"
	RunInfoFile           = "run.json"
	// NodesFile lists the server processes (cluster.Node, with PIDs), for
	// reaping the servers of a killed run.
	NodesFile = "nodes.json"
	// ServerRecordFile is what each Redis node did to the keys during the
	// run, and the record's gaps (package serverrecord owns the format).
	ServerRecordFile = "server-record.jsonl.zst"
)

// FindHistory is the path of run directory dir's history, compressed or
// plain, or an error naming both when it has neither.
func FindHistory(dir string) (string, error) {
	for _, name := range []string{CompressedHistoryFile, HistoryFile} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s has no history (%s or %s)", dir, CompressedHistoryFile, HistoryFile)
}

// HasHistory reports whether dir holds a history of either format.
func HasHistory(dir string) bool {
	_, err := FindHistory(dir)
	return err == nil
}

// HistoryPath is FindHistory's path, or where a new run writes its
// history when dir has none.
func HistoryPath(dir string) string {
	if p, err := FindHistory(dir); err == nil {
		return p
	}
	return filepath.Join(dir, CompressedHistoryFile)
}

// RunInfo is what happened during a run, beyond the history: run.json, so
// that a later `check` or `report` keeps it.
type RunInfo struct {
	Started      time.Time      `json:"started"`
	Ended        time.Time      `json:"ended"`
	Interrupted  bool           `json:"interrupted"`
	RedisVersion string         `json:"redis_version,omitempty"`
	EtcdVersion  string         `json:"etcd_version,omitempty"`
	Backend      string         `json:"backend"`
	Nodes        []cluster.Node `json:"nodes"`
	Resource     *cluster.Node  `json:"resource,omitempty"`
	// Errors are harness problems that did not stop the run: a fault that
	// failed to heal.
	Errors []string `json:"errors,omitempty"`
	// ClientPanics are panics inside the lock under test.
	ClientPanics []string `json:"client_panics,omitempty"`
	// Failovers are the primary changes the sentinels reported.
	Failovers []Failover `json:"failovers,omitempty"`
	// Reaped are servers, containers and files of earlier, killed runs
	// that this run removed.
	Reaped []string `json:"reaped,omitempty"`
	// CleanupFailures are what the backend could not stop, remove or heal
	// when the run closed its system (a container or network left, a
	// toxic left on a compose deployment's proxy), one line each: the
	// next run reaps what is left, and this says what that will be. They
	// do not change the verdict: the history was complete before.
	CleanupFailures []string `json:"cleanup_failures,omitempty"`
	// InterruptedIn names the phase an interrupt (Ctrl-C) stopped:
	// start-up, faults, recovery or finishing.
	InterruptedIn string `json:"interrupted_in,omitempty"`
	// StoppedEarly says why the run ended before its time limit without
	// an interrupt: the first violation, with --stop-on-first-violation.
	StoppedEarly string `json:"stopped_early,omitempty"`
	// StoppedBy is what StoppedEarly stopped at: "overlap" (two believed
	// holds), "never-frees" (a key outlived every client that could hold
	// it), "lost-update" (an accepted write of a value already written)
	// or "refused-stale" (the resource refused a stale fence).
	StoppedBy string `json:"stopped_by,omitempty"`
	// Described is what the run tested, in words, as the harness that ran
	// it knew it: reports show this rather than keep lists of their own.
	Described *Description `json:"described,omitempty"`
	// ReplayOf is the run directory whose fault schedule this run
	// replayed (`lockjepsen replay`), as given.
	ReplayOf string `json:"replay_of,omitempty"`
}

// CleanupFailures are the lines of run.json's cleanup_failures for the
// error of a cluster's Close: one per failure that errors.Join put
// together, however deeply.
func CleanupFailures(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, CleanupFailures(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// Description says in words what a run's lock, workload and faults are.
type Description struct {
	Lock string `json:"lock"`
	// CustomLock: the lock was the user's own (harness.Config.Locker),
	// not the built-in lock its name may suggest.
	CustomLock bool `json:"custom_lock,omitempty"`
	// BackgroundRenewal: the lock keeps its lease alive from a background
	// task, so its holds have no deadline of their own.
	BackgroundRenewal bool `json:"background_renewal,omitempty"`
	// Fences: the lock declares a fencing token on every grant.
	Fences   bool   `json:"fences,omitempty"`
	Workload string `json:"workload"`
	// Faults are the faults the run could inject, by name: those of
	// --nemesis and those of the script's steps.
	Faults map[string]FaultDescription `json:"faults,omitempty"`
	Script string                      `json:"script,omitempty"`
}

// FaultDescription is a fault in words and how reports draw it, as the
// harness that ran it declared it (nemesis.Descriptor): reports draw from
// this rather than keep their own list of faults.
type FaultDescription struct {
	Description string `json:"description"`
	// Class is the report's CSS colour class; empty in run.json files
	// written before faults said how to draw them.
	Class string `json:"class,omitempty"`
	// Label is the short text in a node's fault bar; empty is the name.
	Label string `json:"label,omitempty"`
	// LabelDetail adds to Label what the recorded action did: its detail
	// after Label's word, up to " for ".
	LabelDetail bool `json:"label_detail,omitempty"`
	// Kind, Instant, Crashes and FailsOver are what the fault means to
	// the checkers and reports (nemesis.Descriptor's fields of those
	// names); Kind is empty in run.json files written before faults said.
	Kind      string `json:"kind,omitempty"`
	Instant   bool   `json:"instant,omitempty"`
	Crashes   bool   `json:"crashes,omitempty"`
	FailsOver bool   `json:"fails_over,omitempty"`
}

// UnmarshalJSON also reads the bare string that older run.json files
// hold for a fault, its description alone.
func (f *FaultDescription) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = FaultDescription{Description: s}
		return nil
	}
	type plain FaultDescription // without this method, or it would recurse
	return json.Unmarshal(b, (*plain)(f))
}

// Failover is a change of primary the sentinels reported.
type Failover struct {
	At   int64  `json:"at"` // ns on the history's clock
	From string `json:"from"`
	To   string `json:"to"`
	// AfterFault is the last fault started before it and Duration the time
	// from that fault's start to the sentinels naming the new primary.
	AfterFault string `json:"after_fault,omitempty"`
	Duration   int64  `json:"duration_ns,omitempty"`
}

// WriteJSON writes v as indented JSON, whole or not at all.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

// ReadJSON reads a JSON file into v.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// PointLatest makes store/latest point at the run directory dir (inside
// store). The link is built under a name of its own and renamed over the
// old one, so readers see the old run or the new one and never a missing
// or half-made link, and runs finishing at once in one store do not race.
func PointLatest(store, dir string) error {
	rel, err := filepath.Rel(store, dir)
	if err != nil {
		return fmt.Errorf("link %s: %w", LatestLink, err)
	}
	if rel == LatestLink || rel == "." {
		return fmt.Errorf("link %s: %s is not a run directory of the store", LatestLink, dir)
	}
	latest := filepath.Join(store, LatestLink)
	tmp := fmt.Sprintf("%s.tmp-%d-%d", latest, os.Getpid(), time.Now().UnixNano())
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("link %s: %w", LatestLink, err)
	}
	if err := os.Rename(tmp, latest); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("link %s: %w", LatestLink, err)
	}
	return nil
}

// IsReadOnly reports whether err says a file could not be written because
// its file system or directory does not allow it.
func IsReadOnly(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS)
}
