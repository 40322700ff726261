package runfile

import "time"

// CheckpointFile is what a long run had found by its last checkpoint
// (Settings.CheckpointEvery), rewritten whole while it runs.
const CheckpointFile = "checkpoint.json"

// Checkpoint is checkpoint.json. A run killed before its end (a soak at
// minute 50) leaves it beside the history's flushed prefix: it says at once
// what the run had seen, and `lockjepsen check` gives the full verdict on
// that prefix. Violations counts overlaps of believed holds found as the
// events came; the checkers' verdict over the whole history is results.json.
type Checkpoint struct {
	WrittenAt time.Time `json:"written_at"`
	// Elapsed is the history's clock at the checkpoint (ns).
	Elapsed int64  `json:"elapsed_ns"`
	Phase   string `json:"phase"`
	Events  int64  `json:"events"`
	// Violations so far, and the first of them, if any.
	Violations     int                  `json:"violations_so_far"`
	FirstViolation *CheckpointViolation `json:"first_violation,omitempty"`
	// Final is set on the checkpoint written when the clients stopped.
	Final bool `json:"final"`
}

// CheckpointViolation is the first overlap seen: Second was granted Key at
// At (ns on the history's clock) while First still believed it held it.
type CheckpointViolation struct {
	Key    string `json:"key"`
	First  int    `json:"first_process"`
	Second int    `json:"second_process"`
	At     int64  `json:"at_ns"`
}
