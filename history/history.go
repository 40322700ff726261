// Package history defines lockjepsen's recorded operations and the JSON Lines
// file format they are stored in (history.jsonl). The format is a public
// contract: other tools read it, so fields are only ever added, never renamed.
//
// Every client operation is an "invoke" event followed by exactly one
// completion from the same process: "ok" (it happened), "fail" (it definitely
// did not happen) or "info" (unknown: a timeout or a connection error, it may
// or may not have happened). Nemesis events are single "info" markers with
// process "nemesis" and value.phase "start", "stop", "error" (the fault
// could not be applied) or "skipped" (it was drawn but not applied).
//
// A run recorded with failed acquires summarised has, in place of each
// failed acquire's invoke and fail, "summary" events: one per process, key
// and second, counting the acquires of that process on that key that
// failed in that second (value.count), the first one's invoke (value.from)
// and the last one's completion (value.to). A summary does not interrupt
// the process's invoke/completion pairs.
//
// A "background" event is something a client's lock did on its own,
// beside the holder's operations: with f "extend", one renewal by a
// watchdog that keeps the lease alive in the background (Redisson's), at
// its completion, with the renewal's send (value.from), its outcome
// (value.outcome: "ok", "fail" or "info") and, when ok, the lease's
// validity as the lock then knew it (value.valid_until). It does not
// interrupt the process's invoke/completion pairs, and it changes nothing
// the holder believes: the checkers skip it, and the report draws it, so
// that a renewer that stopped before the key expired shows.
//
// A lock can also end its holder's belief by itself, as rueidislock does
// by cancelling the context it gave the holder. Its ok acquire says so
// (value.context true, and no valid_until: the holder believes until the
// lock tells it otherwise), its own renewals are background extends, and
// the moment the context ended is a background extend that did not
// succeed with value.ended saying why ("notification": the server told
// the lock its key changed or its connection closed; "deadline": a
// renewal ran out of time; "error": a renewal failed). That event ends
// the belief, and the lease model judges the belief against the key's
// life as the grant and the renewals set it.
package history

import (
	"fmt"
	"strconv"
)

// Type is the kind of an event.
type Type string

const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
	// Summary counts failed acquires that are not recorded one by one.
	Summary Type = "summary"
	// Background is a lock's own act beside the holder's operations (a
	// watchdog's renewal), recorded whole at its completion.
	Background Type = "background"
)

// Operation names (the "f" field) of client operations.
const (
	Acquire = "acquire"
	Release = "release"
	Extend  = "extend"
	Read    = "read"
	Write   = "write"
)

// Why a lock ended its holder's belief by itself (Value.Ended).
const (
	EndedNotification = "notification"
	EndedDeadline     = "deadline"
	EndedError        = "error"
)

// NemesisProcess is the process number of nemesis events; it is written as
// the string "nemesis" in the file.
const NemesisProcess = -1

// Op is one event of a history.
type Op struct {
	Index   int64  `json:"index"`
	Time    int64  `json:"time"` // ns since the run started, one monotonic clock for all processes
	Process int    `json:"process"`
	Type    Type   `json:"type"`
	F       string `json:"f"`
	Key     string `json:"key,omitempty"`
	Value   *Value `json:"value,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Value carries the payload of an event; which fields are set depends on f
// and type (see docs/formats.md, "History format").
type Value struct {
	// TTL requested by an acquire or extend invoke, in ns.
	TTL int64 `json:"ttl,omitempty"`
	// Token of the lease (ok acquire; invoke release/extend/write).
	Token string `json:"token,omitempty"`
	// ValidUntil is the client's belief of when it must stop, in ns on the
	// history's clock (ok acquire and ok extend). Absent: no limit (no TTL).
	ValidUntil *int64 `json:"valid_until,omitempty"`
	// Started is when the lock itself began the operation (ok acquire and
	// ok extend), in ns on the history's clock, for a lock whose client
	// runs in a process of its own and stamps its start there: the lease
	// model counts the TTL from it rather than from the invoke. Absent:
	// the invoke.
	Started *int64 `json:"started,omitempty"`
	// Fence is the lease's fencing token, when the lock has one.
	Fence *int64 `json:"fence,omitempty"`
	// N is the counter value read (ok read) or written (invoke write).
	N *int64 `json:"n,omitempty"`
	// Nodes that granted the lease (ok acquire of a multi-node lock).
	Nodes []string `json:"nodes,omitempty"`

	// Count, From and To are a summary's: how many acquires failed, the
	// first one's invoke and the last one's completion, in ns on the
	// history's clock.
	Count int64  `json:"count,omitempty"`
	From  *int64 `json:"from,omitempty"`
	To    *int64 `json:"to,omitempty"`

	// Outcome is a background event's: ok, fail or info, as a completion's
	// type says.
	Outcome Type `json:"outcome,omitempty"`
	// Context is an ok acquire's: the lock gave its holder a context that
	// it cancels itself (see the package comment), so the belief ends at
	// the background event with Ended, at a release's invoke, or a crash.
	Context bool `json:"context,omitempty"`
	// Ended is a background event's: the lock ended the holder's belief
	// there, for this reason (EndedNotification, EndedDeadline or
	// EndedError).
	Ended string `json:"ended,omitempty"`

	// Nemesis fields.
	Phase   string   `json:"phase,omitempty"`   // "start", "stop", "error" or "skipped"
	Targets []string `json:"targets,omitempty"` // what the fault hits, readable
	Clients []int    `json:"clients,omitempty"` // client processes the fault hits
	Detail  string   `json:"detail,omitempty"`  // parameters, readable
}

// IsNemesis reports whether op is a nemesis event.
func (op *Op) IsNemesis() bool { return op.Process == NemesisProcess }

// ProcessName is the process as written in the file.
func ProcessName(p int) string {
	if p == NemesisProcess {
		return "nemesis"
	}
	return strconv.Itoa(p)
}

// I64 returns a pointer to v, for the optional fields of Value.
func I64(v int64) *int64 { return &v }

func (t Type) valid() bool {
	switch t {
	case Invoke, OK, Fail, Info, Summary, Background:
		return true
	}
	return false
}

func (op Op) String() string {
	s := fmt.Sprintf("#%d %dns p=%s %s %s", op.Index, op.Time, ProcessName(op.Process), op.Type, op.F)
	if op.Key != "" {
		s += " " + op.Key
	}
	if op.Error != "" {
		s += " (" + op.Error + ")"
	}
	return s
}
