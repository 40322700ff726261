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
	// RepliesOnly: the fault acts on the reply direction alone (latency,
	// reply loss): requests reach the servers on time and are applied
	// then, so it does not delay what a request does, only what its
	// caller learns.
	RepliesOnly bool
	// LosesReplies: the fault lets requests reach the server and be
	// applied but loses their replies, so a call's unknown outcome under
	// it may well have taken effect. The checkers count such calls as
	// replies lost after the server may have applied them.
	LosesReplies bool
	// OutlastsOps: a random action of the fault lasts at least
	// OpTimeoutsPerFault op timeouts (Options.OpTimeout), whatever
	// --fault-duration says, so that a client gives up inside it.
	OutlastsOps bool
	// InOp: a client fault that strikes inside the armed client's next
	// lock call (acquire, extend or release), with the request in flight,
	// rather than inside its critical section. It needs clients in their
	// own processes (Env.ClientProcesses); the checkers count its events
	// as clients killed with a request in flight.
	InOp bool
	// ByJump: the fault moves a clock by --clock-jump (Action.Offset),
	// which must not be zero.
	ByJump bool
	// Standing: the fault is set once, before the first grant, on every
	// node (on one client, for a client fault), and kept until the end of
	// the run; a random schedule does not draw it again
	// (Schedule.StartStanding).
	Standing bool
	// Instant: the fault has no stop; its start event is the whole of it
	// (a crash), so the checkers and reports pair no stop with it and
	// draw it as a moment.
	Instant bool
	// Crashes: the fault stops the clients its start event names for
	// good, so their beliefs end there (the checkers' end reason crash).
	Crashes bool
	// FailsOver: the fault changes which node is primary (a failover the
	// sentinels are asked for): the checkers count it as a failover on a
	// live lease rather than a fault on the nodes it names, and as able
	// to take a key from the node it demotes.
	FailsOver bool
	// DownUntilRestart: the fault takes its nodes down until a restart
	// --restart-delay later (Options.RestartDelay). A random action lasts
	// that long, and the end of the fault phase does not cut it short: a
	// delayed restart is the operator's mitigation, not part of the fault.
	// The review measures how long nodes were down.
	DownUntilRestart bool
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
	// KindClientClock faults move one protocol client's wall clock
	// (Action.Clients); a Go lock refuses them (ClientClocks).
	KindClientClock Kind = "client-clock"
)

// The moment names a fault's Exercises use; the checker counts them.
const (
	momentStaleActs   = "stale_acts"
	momentStaleGrants = "stale_grants"
	momentSlowReplies = "slow_replies"
	momentNodeFaults  = "node_faults_on_live_lease"
	momentFailovers   = "failovers_on_live_lease"
	momentCrashes     = "holder_crashes"
	momentRepliesLost = "replies_lost"
	momentKilledInOp  = "clients_killed_in_op"
	// momentMovedClientAcquires: a client whose clock a client clock
	// fault moved asked for a key while another client's lease on it was
	// live.
	momentMovedClientAcquires = "moved_client_acquires"
	// momentOffsetGrants: a node granted a lease while a fault had its
	// clock moved.
	momentOffsetGrants = "grants_on_moved_clock"
)

// OpTimeoutsPerFault is the least a random action of an OutlastsOps
// fault lasts, in op timeouts: long enough that a call that began just
// before it ends still times out inside it.
const OpTimeoutsPerFault = 4

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
// process, clock, client clock, then sentinel faults.
func All() []Descriptor {
	return slices.Concat(clientDescriptors, netDescriptors, processDescriptors, clockDescriptors, clientClockDescriptors, failoverDescriptors)
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

// CheckClients refuses an InOp fault where the clients are not processes
// of their own (a Go lock runs inside the harness's process), saying why
// and what stands in.
func (d Descriptor) CheckClients(processes bool) error {
	if !d.InOp || processes {
		return nil
	}
	return fmt.Errorf("%s kills a client's process with a request in flight, and a Go lock runs inside the harness's process, which cannot be killed alone: run the lock as a client in its own process (--client), or use %s, which stands in by stopping a Go client for good after its grant", d.Name, ClientCrash)
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

// MovedByJump names those of the faults that move a clock by
// --clock-jump (Descriptor.ByJump).
func MovedByJump(names []string) []string {
	var out []string
	for _, n := range names {
		if anyOf([]string{n}, func(d Descriptor) bool { return d.ByJump }) {
			out = append(out, n)
		}
	}
	return out
}

// ClientClockFaults names the faults that move a protocol client's
// wall clock.
func ClientClockFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.Kind == KindClientClock })
}

// MovesClientClocks reports whether any of the faults moves a protocol
// client's wall clock: the clients must then start under libfaketime.
func MovesClientClocks(names []string) bool {
	return anyOf(names, func(d Descriptor) bool { return d.Kind == KindClientClock })
}

// CutOffFaults names the faults that keep a node's writes from reaching
// the rest of its cluster (Descriptor.CutsOff).
func CutOffFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.CutsOff })
}

// ReplyLossFaults names the faults that lose replies of requests the
// server may have applied (Descriptor.LosesReplies).
func ReplyLossFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.LosesReplies })
}

// InOpFaults names the client faults that strike with a request in flight
// (Descriptor.InOp).
func InOpFaults() []string {
	return namesWhere(func(d Descriptor) bool { return d.InOp })
}

// DisruptFaults names the faults that act on nodes or their links (Kind
// server or link): while one is active a node may answer late, not at
// all, or with an error, so a request in flight may be applied as late as
// the fault's stop, and a refusal meanwhile may be the fault's doing, not
// a key's (checker.Options.DisruptFaults). By kind rather than by flag, so
// that a server or link fault added later is counted without asking;
// but not those that touch only the replies (RepliesOnly: latency,
// reply loss), whose requests the servers apply on time and whose
// refusals, when they arrive, are the servers' own: whole-run latency
// (the in-op threat) excused every refusal of a lock that never frees.
func DisruptFaults() []string {
	return namesWhere(func(d Descriptor) bool { return (d.Kind == KindServer || d.Kind == KindLink) && !d.RepliesOnly })
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
	return err == nil && d.AimsAtClients()
}

// IsStanding reports whether the named fault is set once for the whole
// run (Descriptor.Standing); an unknown name is not.
func IsStanding(name string) bool {
	d, err := Lookup(name)
	return err == nil && d.Standing
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

// AimsAtClients reports whether the fault hits clients rather than nodes.
func (d Descriptor) AimsAtClients() bool { return d.Kind == KindClient || d.Kind == KindClientClock }
