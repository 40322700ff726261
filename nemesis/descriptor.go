package nemesis

import (
	"fmt"
	"slices"
	"strings"
)

// Descriptor is everything the rest of lockjepsen knows about a fault
// before it runs: help, validation, the cluster it needs and how reports
// draw it. Each is declared next to its fault's implementation, so that a
// new fault is one entry there and nothing else to keep in step.
type Descriptor struct {
	Name        string
	Description string
	// Kind is what the fault acts on; a client fault aims at one client
	// (Action.Clients) rather than at nodes.
	Kind Kind
	// FakeClock: the fault moves node clocks, so the nodes must start
	// under libfaketime (which costs throughput, so only these ask).
	FakeClock bool
	// Links: the fault acts on network links, so clients must dial
	// through proxies rather than directly.
	Links bool
	// FreezesClient: the fault stops a client process, whose own links
	// must then carry nothing; where the system's clients keep talking in
	// the background (etcd's keep-alives), they too must dial through
	// proxies.
	FreezesClient bool
	// LosesKeys: the fault can take a key from a correct lock's holder by
	// itself (a restart that forgets unsynced writes, a clock moved
	// forward). The checkers then count an overlap it explains as the
	// deployment's loss, not the lock's. A failover needs no flag: holds
	// granted by two primaries show it.
	LosesKeys bool
	// CutsOff: the fault keeps the target nodes' writes from reaching the
	// rest of their cluster while clients still reach them (isolate). A
	// key such a node grants meanwhile never reaches the replica a
	// failover promotes, so the checkers count an overlap of its holder
	// with a grant of that replica as the failover's, whatever any
	// release did on the cut-off node.
	CutsOff bool
	// Exercises names the dangerous moments (the checker's moment names,
	// results.json "exercised") that show the fault hit what it aims at:
	// a safe verdict with none of them is vacuous.
	Exercises []string
	// Systems are the systems the fault runs on (cluster.Single, ...);
	// nil is every system.
	Systems []string
	// SystemsWhy says why the fault needs those systems, for the error
	// given when it does not fit.
	SystemsWhy string
	Draw       Draw

	new func(clients *ClientFaults) (Fault, error)
}

// Kind is what a fault acts on.
type Kind string

// The kinds of faults.
const (
	KindServer Kind = "server" // node processes, or what the servers do (a failover)
	KindLink   Kind = "link"   // network links, between clients and nodes or among nodes
	KindClient Kind = "client" // one client process, from inside its critical section
	KindClock  Kind = "clock"  // node wall clocks
)

// The moment names a fault's Exercises use; the checker counts them.
const (
	momentStaleActs   = "stale_acts"
	momentStaleGrants = "stale_grants"
	momentSlowReplies = "slow_replies"
	momentNodeFaults  = "node_faults_on_live_lease"
	momentFailovers   = "failovers_on_live_lease"
	momentCrashes     = "holder_crashes"
)

// serverMoments are what a server-side fault exercises.
var serverMoments = []string{momentNodeFaults}

// Draw is how reports draw a fault. The harness records it in run.json,
// so that a report draws what the run that made it knew, and reports
// need not import the faults.
type Draw struct {
	// Class is the report's CSS colour class.
	Class string
	// Label is the short text inside a node's fault bar; empty draws the
	// fault's name.
	Label string
	// LabelDetail adds to Label what the recorded action did (its detail
	// after Label's word, up to " for "): a clock bar says by how much.
	LabelDetail bool
}

// The report's colour classes (reports/assets/report.css).
const (
	classClient  = "f-client"
	classClock   = "f-clock"
	classProcess = "f-process"
	classNet     = "f-net"
	classOther   = "f-other"
)

// All returns every fault's descriptor, by kind: client, network,
// process, clock, then sentinel faults.
func All() []Descriptor {
	return slices.Concat(clientDescriptors, netDescriptors, processDescriptors, clockDescriptors, failoverDescriptors)
}

// Lookup returns the named fault's descriptor.
func Lookup(name string) (Descriptor, error) {
	for _, d := range All() {
		if d.Name == name {
			return d, nil
		}
	}
	return Descriptor{}, fmt.Errorf("unknown nemesis %q (want none or a comma list of: %s)", name, strings.Join(KnownNames(), ", "))
}

// Fits reports whether the fault runs on system.
func (d Descriptor) Fits(system string) bool {
	return d.Systems == nil || slices.Contains(d.Systems, system)
}

// CheckSystem refuses a system the fault does not run on, saying why.
func (d Descriptor) CheckSystem(system string) error {
	if d.Fits(system) {
		return nil
	}
	return fmt.Errorf("%s %s: it needs --system %s", d.Name, d.SystemsWhy, strings.Join(d.Systems, " or "))
}

// New returns the fault of the given name.
func New(name string, clients *ClientFaults) (Fault, error) {
	d, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return d.new(clients)
}

// ParseList reads "--nemesis a,b"; "none" or "" is no fault.
func ParseList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == None {
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == None {
			// none is a name the user knows, so "unknown" would mislead:
			// what is wrong is asking for no fault and faults at once.
			return nil, fmt.Errorf("%s cannot be combined with other faults (got %q): give %s alone, or only the faults", None, s, None)
		}
		if _, err := Lookup(name); err != nil {
			return nil, err
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// KnownNames is the sorted list of fault names.
func KnownNames() []string {
	var names []string
	for _, d := range All() {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return names
}

// NeedsFakeClock reports whether any of the faults moves node clocks.
func NeedsFakeClock(names []string) bool {
	return anyOf(names, func(d Descriptor) bool { return d.FakeClock })
}

// ClockFaults names the faults that move node clocks: while one is
// active, a node may keep a key past its TTL.
func ClockFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.FakeClock })
}

// KeyLossFaults names the faults that can take a key from a correct
// lock's holder by themselves.
func KeyLossFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.LosesKeys })
}

// CutOffFaults names the faults that keep a node's writes from reaching
// the rest of its cluster (Descriptor.CutsOff).
func CutOffFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.CutsOff })
}

// DisruptFaults names the faults that act on nodes or their links (Kind
// server or link): while one is active a node may answer late, not at
// all, or with an error, so a request in flight may be applied as late as
// the fault's stop, and a refusal meanwhile may be the fault's doing, not
// a key's (checker.Options.DisruptFaults). By kind rather than by flag, so
// that a server or link fault added later is counted without asking.
func DisruptFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.Kind == KindServer || d.Kind == KindLink })
}

// namesWhere names the faults whose descriptors keep says yes to.
func namesWhere(keep func(Descriptor) bool) []string {
	var names []string
	for _, d := range All() {
		if keep(d) {
			names = append(names, d.Name)
		}
	}
	return names
}

// NeedsLinks reports whether any of the faults needs clients to dial
// through proxies: one that acts on network links, or, on a system whose
// clients talk in the background (backgroundClients), one that freezes a
// client.
func NeedsLinks(names []string, backgroundClients bool) bool {
	return anyOf(names, func(d Descriptor) bool { return d.Links || backgroundClients && d.FreezesClient })
}

// AimsAtClient reports whether the named fault hits one client rather
// than nodes; an unknown name does not.
func AimsAtClient(name string) bool {
	d, err := Lookup(name)
	return err == nil && d.Kind == KindClient
}

// anyOf reports whether a known fault of names has the property; unknown
// names are Lookup's to refuse.
func anyOf(names []string, has func(Descriptor) bool) bool {
	for _, n := range names {
		if d, err := Lookup(n); err == nil && has(d) {
			return true
		}
	}
	return false
}

// Known lists the fault names with a line each.
//
// Deprecated: use All or Lookup. It stays only while harness/config.go
// still reads it, and goes once that switches to Lookup.
var Known = map[string]string{}

func init() {
	for _, d := range All() {
		Known[d.Name] = d.Description
	}
}
