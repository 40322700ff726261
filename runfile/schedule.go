package runfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Files of a run directory written for replay and shrinking.
const (
	// ScheduleFile is the fault schedule the run executed (Schedule), so
	// that `lockjepsen replay` can play the same faults again.
	ScheduleFile = "schedule.json"
	// ShrunkFile marks a run that `lockjepsen shrink` made (Shrunk).
	ShrunkFile = "shrunk.json"
)

// Schedule is schedule.json: every fault action the run started, in the
// order it started them, with offsets from the start of the fault phase.
type Schedule struct {
	// PhaseStart is when the fault phase began, in ns on the history's
	// clock: a fault's offset plus this is its time in the history.
	PhaseStart int64 `json:"phase_start_ns"`
	// PhaseRan is how long the fault phase lasted: the time limit, or
	// less when the run stopped early (at its first violation).
	PhaseRan time.Duration    `json:"phase_ran_ns"`
	Faults   []ScheduledFault `json:"faults"`
}

// ScheduledFault is one executed action. Its fields are those of a
// nemesis action (nemesis.Action), which the harness converts to and
// from: this package does not import the faults.
type ScheduledFault struct {
	Fault string `json:"fault"`
	// At is when the schedule took the action up, from the fault phase's
	// start; Applied is when the fault was in place. An action aimed
	// after a grant (AfterGrant) waits between the two for the next
	// grant, and a replay aims it at a grant again, not at Applied.
	At      time.Duration `json:"at_ns"`
	Applied time.Duration `json:"applied_ns"`
	// Nodes are the targets as planned ("@primary" is the primary at the
	// time, "@holder" a node of the latest lease at the time); Hit are
	// the nodes the fault was applied to.
	Nodes []string `json:"nodes,omitempty"`
	Hit   []string `json:"hit,omitempty"`
	// Clients are client workers (0-based): a client fault's client, or
	// the clients whose links a network fault narrows to.
	Clients      []int         `json:"clients,omitempty"`
	For          time.Duration `json:"for_ns"`
	Offset       time.Duration `json:"offset_ns,omitempty"`
	Rate         float64       `json:"rate,omitempty"`
	LinkLatency  time.Duration `json:"link_latency_ns,omitempty"`
	LinkJitter   time.Duration `json:"link_jitter_ns,omitempty"`
	LinkRateKBps int64         `json:"link_rate_kbps,omitempty"`
	LoseUnsynced bool          `json:"lose_unsynced,omitempty"`
	AfterGrant   bool          `json:"after_grant,omitempty"`
	// LeaseNodes is how many nodes had granted the lease a fault aimed
	// at the holder ("@holder") hit; aimed after a grant, a replay waits
	// for a grant by as many nodes.
	LeaseNodes int  `json:"lease_nodes,omitempty"`
	Internal   bool `json:"internal,omitempty"`
	// Error is why the fault could not be applied; a replay skips it.
	Error string `json:"error,omitempty"`
}

// Finished says why run directory dir holds no finished run (nil when it
// does): a run whose harness failed, or was killed, before the checkers
// ran has no results.json, and so no verdict and no executed faults.
func Finished(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, ResultsFile)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s did not finish (it has no %s: its harness failed or was stopped before the checkers ran; its output says why), so it has no verdict or faults to replay or shrink", dir, ResultsFile)
	}
	return nil
}

// ReadSchedule reads run directory dir's schedule.json. A run stored
// before schedules were recorded has none: the error says so.
func ReadSchedule(dir string) (*Schedule, error) {
	var s Schedule
	err := ReadJSON(filepath.Join(dir, ScheduleFile), &s)
	if errors.Is(err, os.ErrNotExist) {
		if err := Finished(dir); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s has no %s: it was recorded before lockjepsen stored the faults it executed, so its faults cannot be replayed", dir, ScheduleFile)
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Shrunk is shrunk.json: how `lockjepsen shrink` reduced a run, step by
// step, to the run stored beside it.
type Shrunk struct {
	// Original is the run directory that was shrunk.
	Original string `json:"original"`
	// Faults, Clients, Keys and FaultPhase are the size of the shrunk
	// run; the Original* fields are the size of the original.
	Faults             int           `json:"faults"`
	Clients            int           `json:"clients"`
	Keys               int           `json:"keys"`
	FaultPhase         time.Duration `json:"fault_phase_ns"`
	OriginalFaults     int           `json:"original_faults"`
	OriginalClients    int           `json:"original_clients"`
	OriginalFaultPhase time.Duration `json:"original_fault_phase_ns"`
	// Violation is what had to come back: the mechanisms (kind/cause) of
	// the original, any one of which counts.
	Violation []string `json:"violation"`
	// Reproduced of Tries is the final reproduction rate of the shrunk
	// run, measured after the search.
	Reproduced int `json:"reproduced"`
	Tries      int `json:"tries"`
	// Steps are the candidates tried, in order.
	Steps []ShrinkStep `json:"steps"`
	// Stopped says why the search ended before it was done: the budget,
	// an interrupt.
	Stopped string `json:"stopped,omitempty"`
	// Took is the search's wall time.
	Took time.Duration `json:"took_ns"`
	// Replay is the command that reruns the shrunk run.
	Replay string `json:"replay"`
}

// ShrinkStep is one candidate of the search.
type ShrinkStep struct {
	// Stage is faults, clients, keys, cut, tighten or durations.
	Stage string `json:"stage"`
	// Tried is what the candidate removed or changed, in words.
	Tried string `json:"tried"`
	// Kept: the candidate reproduced k of n and became the best so far;
	// otherwise what it removed was put back.
	Kept       bool `json:"kept"`
	Reproduced int  `json:"reproduced"`
	Tries      int  `json:"tries"`
}

// ReadShrunk reads dir's shrunk.json; ok is false when the run was not
// made by shrinking.
func ReadShrunk(dir string) (s *Shrunk, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, ShrunkFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	s = &Shrunk{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, false, fmt.Errorf("%s: %w", ShrunkFile, err)
	}
	return s, true, nil
}
