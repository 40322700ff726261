// Package serverrecord owns the server record of a run: what each Redis
// node did to the keys while the run lasted (set, with the token the key
// then held; TTL changed; deleted; expired; evicted), and where that
// record has gaps. An Observer per node writes it beside the history, in
// the history's time base; Read gives it back to `lockjepsen check` and,
// later, the checkers and reports. Nothing here imports them.
//
// The file is JSON Lines, one Event a line, compressed with zstd when its
// name ends in ".zst" (the history's writer and reader: see package
// history). Lines are in the order they were written, which is not
// quite the order of their times (a gap is written when it closes); Read
// sorts them.
package serverrecord

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/lockjepsen/lockjepsen/history"
)

// Kinds of Event. A node's keyspace event is kept under its own name
// (Redis's: "set", "expire", "del", "expired", "evicted", "incrby",
// "rename_from", ...); these are the ones that matter to a lock, and the
// harness's own two.
const (
	Set     = "set"     // a command set the key; Token is the value it held
	Expire  = "expire"  // a command set or changed the key's TTL
	Del     = "del"     // a command deleted the key
	Expired = "expired" // the node removed the key when its TTL ran out
	Evicted = "evicted" // the node removed the key to free memory (maxmemory)
	// Gap is a span in which the node's record may be missing events: the
	// observer's connection was lost (a killed node, a cut), or the node
	// did not answer (a paused node). Nothing is guessed inside it.
	Gap = "gap"
)

// Event is one line of the record.
type Event struct {
	// T is on the history's clock (nanoseconds since the run's start):
	// when the observer received the event, so the node did it at T or
	// before. For a gap, T is where it starts.
	T    int64  `json:"t"`
	Node string `json:"node"`
	Kind string `json:"kind"`
	Key  string `json:"key,omitempty"`
	// Token is the value the key held: for a set, read from the node
	// before any other change of the key (empty when the key changed
	// first: then TokenUnread says so); for an expire or a removal, the
	// value of the key's last set, when the record is whole since.
	Token string `json:"token,omitempty"`
	// TokenUnread says why a set has no token.
	TokenUnread string `json:"token_unread,omitempty"`
	// End and Why describe a gap: where it ends on the same clock, and
	// what caused it.
	End int64  `json:"end,omitempty"`
	Why string `json:"why,omitempty"`
}

// Summary counts a record, for results.json.
type Summary struct {
	Events int `json:"events"`
	Gaps   int `json:"gaps"`
	// Nodes are the nodes observed, in the order first seen.
	Nodes []string `json:"nodes,omitempty"`
	// Cut says that the file ended before it was closed (a harness
	// that died mid-run).
	Cut bool `json:"cut,omitempty"`
}

// Summarize counts events (gaps apart) and gaps.
func Summarize(events []Event) Summary {
	var s Summary
	seen := map[string]bool{}
	for _, e := range events {
		s.add(e, seen)
	}
	return s
}

func (s *Summary) add(e Event, seen map[string]bool) {
	if !seen[e.Node] {
		seen[e.Node] = true
		s.Nodes = append(s.Nodes, e.Node)
	}
	if e.Kind == Gap {
		s.Gaps++
	} else {
		s.Events++
	}
}

// Writer appends events to a record file; safe for concurrent use by the
// observers of several nodes.
type Writer struct {
	mu  sync.Mutex
	w   *history.Writer
	buf []byte
	err error
}

// Create starts a record at path, which must not exist.
func Create(path string) (*Writer, error) {
	w, err := history.CreateWriter(path)
	if err != nil {
		return nil, fmt.Errorf("create the server record: %w", err)
	}
	return &Writer{w: w}, nil
}

// Write appends one event. The first error is kept and returned by every
// later call and by Close.
func (w *Writer) Write(e Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.buf = append(appendJSON(w.buf[:0], &e), '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("write the server record: %w", err)
	}
	return w.err
}

// Flush writes out what is buffered, so that a harness that dies leaves a
// readable prefix.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("write the server record: %w", err)
		}
	}
	return w.err
}

// Close ends the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.w.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("write the server record: %w", err)
	}
	return w.err
}

// Read reads a record file of either format and returns its events
// sorted by time (stable: a node's events at one instant keep their
// order). A file cut short (a harness killed mid-run) gives its prefix
// with Summary.Cut set; a line that is not an event is an error that
// names it.
func Read(path string) ([]Event, Summary, error) {
	var events []Event
	sum, err := Scan(path, func(e Event) { events = append(events, e) })
	if err != nil {
		return nil, Summary{}, err
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].T < events[j].T })
	return events, sum, nil
}

// Scan reads a record file and calls f with each event in the file's
// order, in memory that does not grow with the record (a soak's record
// is long): what results.json counts.
func Scan(path string, f func(Event)) (Summary, error) {
	h, err := history.Open(path)
	if err != nil {
		return Summary{}, fmt.Errorf("read the server record: %w", err)
	}
	defer h.Close()
	var sum Summary
	seen := map[string]bool{}
	err = decode(h, func(e Event) {
		sum.add(e, seen)
		f(e)
	})
	if err != nil {
		return Summary{}, fmt.Errorf("read the server record %s: %w", path, err)
	}
	if h.Corrupt() != "" {
		return Summary{}, fmt.Errorf("read the server record %s: %s", path, h.Corrupt())
	}
	sum.Cut = h.Cut()
	return sum, nil
}

func decode(r io.Reader, f func(Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if e.Node == "" || e.Kind == "" {
			return fmt.Errorf("line %d: an event needs a node and a kind", line)
		}
		f(e)
	}
	return sc.Err()
}
