// Package nemesis injects faults into a run and heals them. Each kind of
// fault is one small type (Fault): it says whether it applies to the system
// under test, starts and stops one action on chosen targets, and heals
// whatever it still has in effect. A Schedule draws actions at random from
// the run's seed, or plays a script of timed steps, and records every
// fault's start and stop in the history.
package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
)

// Names of the faults.
const (
	None        = "none"
	ClientPause = "client-pause"
	ClientCrash = "client-crash"
	// ClientKillInOp kills a client process with a lock call's request in
	// flight.
	ClientKillInOp = "client-kill-in-op"
	// ReplyLoss drops the replies of the target nodes' links, while their
	// requests still reach the server.
	ReplyLoss   = "reply-loss"
	Partition   = "partition"
	Reject      = "reject"
	Latency     = "latency"
	Slow        = "slow"
	Pause       = "pause"
	Kill        = "kill"
	ClockJump   = "clock-jump"
	ClockStrobe = "clock-strobe"
	ClockDrift  = "clock-drift"
	// ClockOffset keeps a node's clock off the clients' for the whole run.
	ClockOffset = "clock-offset"
	// Client clock faults move a protocol client's wall clock.
	ClientClockJump   = "client-clock-jump"
	ClientClockStrobe = "client-clock-strobe"
	ClientClockDrift  = "client-clock-drift"
	ClientClockOffset = "client-clock-offset"
	// Isolate cuts a node off from the rest of its cluster (its inbound
	// internal links) while clients still reach it.
	Isolate = "isolate"
	// Failover asks the sentinels for a manual failover.
	Failover = "failover"
)

// Env is what faults act on.
type Env struct {
	Rec   *history.Recorder
	Nodes []string
	// Pauser, Killer and Clock act on node processes and clocks; each is
	// nil where the backend cannot.
	Pauser cluster.Pauser
	Killer cluster.Killer
	Clock  cluster.ClockSetter
	// ClientClock moves protocol clients' wall clocks; nil for a Go lock.
	ClientClock ClientClocks
	// Mesh holds every proxied link; nil without proxies.
	Mesh *proxy.Mesh
	// Internal cuts the cluster's own links into a node where the mesh has
	// none (the container backends route them through a toxiproxy server);
	// nil when the backend has no such network.
	Internal InternalNet
	// FakeClock is set when the nodes run with a movable clock.
	FakeClock   bool
	Persistence string
	Clients     int
	TTL         time.Duration
	// ClientProcesses: every client is an operating-system process of its
	// own (a lock client over the client protocol), which an InOp fault
	// can kill alone; a Go lock runs inside the harness process.
	ClientProcesses bool
	// Holder returns the nodes that granted the latest lease; nil for the
	// holder target to fall back to a random node.
	Holder func() []string
	// Primary returns the node the sentinels name as primary now; nil on
	// systems without one.
	Primary func() string
	// ManualFailover asks the sentinels for a failover; nil without them.
	ManualFailover func(ctx context.Context) (string, error)
	// Granted receives a value after every granted lease (it may drop
	// some), for actions that wait for a grant.
	Granted <-chan struct{}
	// OnEvent is told of every fault event the schedule records (phases
	// start, stop, error), and of each fault about to be applied
	// (PhaseStarting).
	OnEvent func(f, phase string, nodes []string)
}

// Action is one injection: which fault, on what, for how long, how hard.
type Action struct {
	Fault string
	Nodes []string
	// Clients narrows a network fault to these clients' links to Nodes;
	// empty means every link to Nodes (clients and other nodes). For
	// client faults, the client (its worker) to hit.
	Clients []int
	// ClientProcs are the processes of Clients when a client clock fault
	// started, which its start and stop events name.
	ClientProcs []int
	// For is how long the fault lasts before it is stopped (for kill, how
	// long the node stays down).
	For time.Duration
	// Clock faults: the jump (may be negative), the drift rate.
	Offset time.Duration
	Rate   float64
	// Network faults other than partition and reject.
	Link proxy.Fault
	// Kill: also lose the append-only file's unsynced tail.
	LoseUnsynced bool
	// AfterGrant delays the start until the next granted lease, to hit a
	// holder before replication catches up.
	AfterGrant bool
	// LeaseNodes, with AfterGrant and the holder placeholder, waits for a
	// grant by this many nodes (0: any grant). A replay aims at the kind
	// of lease the original hit: on Redlock one crash breaks a lease
	// granted by a bare majority, and none granted by every node.
	LeaseNodes int
	// Internal narrows a network fault to the cluster's own links into
	// the nodes (replication, sentinels): latency there is replication lag.
	Internal bool
}

// PrimaryPlaceholder in Action.Nodes stands for the node that is primary
// when the action starts (scripts are written before the run).
const PrimaryPlaceholder = "@primary"

// HolderPlaceholder in Action.Nodes stands for a node that granted the
// latest lease when the action starts (after its grant, for one aimed
// after a grant). A random schedule with the holder target plans its
// actions so, and schedule.json keeps the placeholder (with the node hit
// beside it): a replay then aims at the lease of its own time, as the
// original did, instead of at a node that may hold nothing by then.
const HolderPlaceholder = "@holder"

// Fault is one kind of fault.
type Fault interface {
	Name() string
	// Describe says what the action does, in the words the history
	// records as its start's detail ("" for a fault that records its own
	// events).
	Describe(a *Action) string
	// Available refuses, before the run, a fault the system cannot take.
	Available(env *Env, a *Action) error
	Start(ctx context.Context, env *Env, a *Action) error
	Stop(ctx context.Context, env *Env, a *Action) error
	// Heal undoes whatever the fault still has in effect; idempotent.
	Heal(ctx context.Context, env *Env) error
}

// selfRecording faults record their own events when they take effect (a
// client fault is armed by the schedule but happens later).
type selfRecording interface{ recordsItself() }

// record writes a nemesis event.
// PhaseStarting is OnEvent's phase for a fault about to be applied; the
// history's start event is recorded once it has been.
const PhaseStarting = "starting"

func record(env *Env, f, phase string, a *Action, detail string, err error) {
	v := &history.Value{Phase: phase, Targets: append([]string(nil), a.Nodes...), Detail: detail}
	if len(a.Nodes) == 0 && len(a.ClientProcs) > 0 {
		v.Clients = append([]int(nil), a.ClientProcs...)
		for _, p := range a.ClientProcs {
			v.Targets = append(v.Targets, fmt.Sprintf("client %d", p))
		}
	}
	op := history.Op{Process: history.NemesisProcess, Type: history.Info, F: f, Value: v}
	if err != nil {
		op.Error = err.Error()
	}
	env.Rec.Record(op)
	if env.OnEvent != nil {
		env.OnEvent(f, phase, a.Nodes)
	}
}
