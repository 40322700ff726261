package checker

import (
	"fmt"
	"strings"

	"github.com/lockjepsen/lockjepsen/history"
)

// FaultMeaning is what a fault means to the checkers and reports, as its
// descriptor says (nemesis.Descriptor) and run.json records it: the
// checker reads histories alone and imports no fault.
type FaultMeaning struct {
	// Kind is what the fault acts on (nemesis.Kind): "client" and
	// "client-clock" faults hit clients, the others nodes or their links.
	Kind string
	// Instant: the fault has no stop; its start event is the whole of it.
	Instant bool
	// Crashes: the fault stops the clients its start names for good, and
	// so ends their beliefs (EndCrash).
	Crashes bool
	// FailsOver: the fault changes which node is primary (a failover the
	// nemesis asks for): a failover on a live lease, not a fault on the
	// nodes it names, and one that may take a key from the node it
	// demotes.
	FailsOver bool
}

// The kinds of fault that hit clients rather than nodes (nemesis.Kind).
const (
	kindClient      = "client"
	kindClientClock = "client-clock"
)

// AimsAtClients reports whether the fault hits clients rather than nodes.
func (m FaultMeaning) AimsAtClients() bool { return m.Kind == kindClient || m.Kind == kindClientClock }

// FaultMeanings are a run's faults' meanings by name (Options.Faults).
// A name it lacks, or a nil map, is read by LegacyFaultMeaning: a history
// stored before run.json recorded meanings keeps reading as it did.
type FaultMeanings map[string]FaultMeaning

// Of is the named fault's meaning.
func (fm FaultMeanings) Of(name string) FaultMeaning {
	if m, ok := fm[name]; ok {
		return m
	}
	return LegacyFaultMeaning(name)
}

// LegacyFaultMeaning is a fault's meaning read from its name alone, as the
// checkers and reports read it before run.json recorded meanings: the one
// place that knows fault names, for stored runs without them.
func LegacyFaultMeaning(name string) FaultMeaning {
	switch {
	case name == "client-crash":
		return FaultMeaning{Kind: kindClient, Instant: true, Crashes: true}
	case name == "failover":
		return FaultMeaning{Kind: "server", FailsOver: true}
	case strings.HasPrefix(name, "client-clock-"):
		return FaultMeaning{Kind: kindClientClock}
	case strings.HasPrefix(name, "client-"):
		return FaultMeaning{Kind: kindClient}
	}
	return FaultMeaning{}
}

// crashedClients are the clients nemesis event op crashed. Only a crash
// that happened ends beliefs: "error" and "skipped" mark one that was
// never applied.
func crashedClients(op *history.Op, fm FaultMeanings) []int {
	if op.Value == nil || (op.Value.Phase != "start" && op.Value.Phase != "") || !fm.Of(op.F).Crashes {
		return nil
	}
	return op.Value.Clients
}

// Faults are the nemesis faults of a history with the spans they were
// active, in the order they started, their meanings read by name
// (LegacyFaultMeaning); FaultMeanings.Faults reads the run's own.
func Faults(ops []history.Op) []Fault { return FaultMeanings(nil).Faults(ops) }

// Faults are the nemesis faults of a history with the spans they were
// active, in the order they started: End is Never for a fault never
// stopped, and Start for an instant one (FaultMeaning.Instant).
func (fm FaultMeanings) Faults(ops []history.Op) []Fault {
	var fs []*Fault
	p := FaultPairer{Meanings: fm}
	for i := range ops {
		if ops[i].Process == history.NemesisProcess {
			if f, _ := p.Apply(&ops[i]); f != nil {
				fs = append(fs, f)
			}
		}
	}
	out := make([]Fault, len(fs))
	for i, f := range fs {
		out[i] = *f
	}
	return out
}

// FaultPairer pairs a history's nemesis events into faults, for the
// checkers and the reports alike: faults of one kind can overlap (two
// clients paused at once), so a stop ends the open start of the same
// fault on the same targets and clients. Its zero value is ready, and
// reads meanings as a nil FaultMeanings does.
type FaultPairer struct {
	Meanings FaultMeanings
	open     map[string]*Fault // started and not yet stopped, by what a stop names
}

// Apply takes a nemesis event: it returns the fault a start (or an instant
// fault's event) begins, or the open fault a stop ends; neither for an
// event of another phase ("error", "skipped") or a stop of nothing open.
func (p *FaultPairer) Apply(op *history.Op) (started, stopped *Fault) {
	var v history.Value
	if op.Value != nil {
		v = *op.Value
	}
	id := fmt.Sprintf("%s|%v|%v", op.F, v.Targets, v.Clients)
	switch v.Phase {
	case "start", "":
		f := &Fault{Name: op.F, Start: op.Time, End: op.Time, Targets: v.Targets, Clients: v.Clients, Detail: v.Detail}
		if v.Phase == "start" && !p.Meanings.Of(op.F).Instant {
			if p.open == nil {
				p.open = map[string]*Fault{}
			}
			p.open[id] = f
			f.End = Never
		}
		return f, nil
	case "stop":
		if f, ok := p.open[id]; ok {
			f.End = op.Time
			delete(p.open, id)
			return nil, f
		}
	}
	return nil, nil
}
