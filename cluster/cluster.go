// Package cluster describes the Redis topologies under test and the backends
// that start them. A backend (local processes today, containers later) turns
// a Spec into a running Cluster; everything above this package sees only
// addresses and node names, so the same run works on any backend.
package cluster

import (
	"context"
	"fmt"
	"time"
)

// Systems under test.
const (
	Single   = "single"   // one redis-server
	Sentinel = "sentinel" // primary, replicas, sentinels
	Redlock  = "redlock"  // N independent redis-servers
)

// DefaultNodes is the number of nodes of a system when none is asked for.
func DefaultNodes(system string) int {
	switch system {
	case Redlock:
		return 5
	case Sentinel:
		return 3
	}
	return 1
}

// Persistence modes of a node.
const (
	PersistNone     = "none"
	PersistEverysec = "everysec"
	PersistAlways   = "always"
)

// Spec is what a backend is asked to start.
type Spec struct {
	System string
	// Nodes is the number of redis-server nodes under test (single: 1).
	Nodes int
	// Dir is the run's store directory; each node keeps its data directory
	// and log file under Dir/nodes/<name>.
	Dir string
	// Persistence is one of PersistNone, PersistEverysec, PersistAlways.
	Persistence string
	// Resource asks for a separate redis-server that holds the protected
	// resource of the counter workload. No fault touches it.
	Resource bool
	// FakeClock starts the nodes under test with a clock the nemesis can
	// move (libfaketime). It costs throughput, so only clock faults ask.
	FakeClock bool
}

// Role of a node.
const (
	RolePrimary  = "primary"
	RoleReplica  = "replica"
	RoleNode     = "node"
	RoleResource = "resource"
)

// Node is one server of a running cluster, as clients and reports see it.
type Node struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Addr    string `json:"addr"` // host:port that clients dial
	PID     int    `json:"pid,omitempty"`
	LogPath string `json:"log,omitempty"`
}

// Cluster is a running topology. Close stops every process it started and
// is safe to call more than once and from any goroutine.
type Cluster interface {
	Nodes() []Node
	// Resource is the protected resource store, nil if the spec did not ask
	// for one.
	Resource() *Node
	Close(ctx context.Context) error
}

// Controller is implemented by clusters whose nodes the nemesis can act
// on. Node names are those of Nodes().
type Controller interface {
	// Pause freezes a node's process (SIGSTOP); Resume continues it.
	Pause(node string) error
	Resume(node string) error
	// Kill ends a node's process at once (SIGKILL), losing whatever it had
	// not persisted. With loseUnsynced, the tail of its append-only file
	// written in the last second is cut off too, as if the machine had
	// crashed before the fsync.
	Kill(node string, loseUnsynced bool) error
	// Restart starts a killed node again on the same address and data.
	Restart(ctx context.Context, node string) error
	// SetClock moves a node's wall clock to real time + offset; only for a
	// cluster started with Spec.FakeClock.
	SetClock(node string, offset time.Duration) error
}

// Backend starts clusters.
type Backend interface {
	Name() string
	Start(ctx context.Context, spec Spec) (Cluster, error)
}

// Validate checks a spec before anything is started.
func (s Spec) Validate() error {
	switch s.System {
	case Single:
		if s.Nodes != 1 {
			return fmt.Errorf("system %q has exactly 1 node, not %d", s.System, s.Nodes)
		}
	case Redlock:
		if s.Nodes < 3 || s.Nodes%2 == 0 {
			return fmt.Errorf("system %q needs an odd number of nodes, at least 3, not %d", s.System, s.Nodes)
		}
	case Sentinel:
		return fmt.Errorf("system %q is not available yet (want %q or %q)", s.System, Single, Redlock)
	default:
		return fmt.Errorf("unknown system %q (want %q or %q)", s.System, Single, Redlock)
	}
	switch s.Persistence {
	case PersistNone, PersistEverysec, PersistAlways:
	default:
		return fmt.Errorf("unknown persistence %q (want none, everysec or always)", s.Persistence)
	}
	if s.Dir == "" {
		return fmt.Errorf("spec has no directory")
	}
	return nil
}
