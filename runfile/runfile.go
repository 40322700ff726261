// Package runfile names the files of a run directory and defines run.json:
// what the harness writes and the reports read back, in one place, so that
// neither mirrors the other (the harness imports reports to render a
// finished run, so reports cannot import the harness).
package runfile

import (
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// Files of a run directory.
const (
	HistoryFile = "history.jsonl"
	ResultsFile = "results.json"
	ConfigFile  = "config.json"
	RunInfoFile = "run.json"
	// NodesFile lists the server processes (cluster.Node, with PIDs), for
	// reaping the servers of a killed run.
	NodesFile = "nodes.json"
)

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
	// Reaped are servers of earlier, killed runs that this run stopped.
	Reaped []string `json:"reaped,omitempty"`
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
