// Package cluster describes the Redis topologies under test and the backends
// that start them. A backend (local processes today, containers later) turns
// a Spec into a running Cluster; everything above this package sees only
// addresses and node names, so the same run works on any backend.
package cluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Systems under test.
const (
	Single   = "single"   // one redis-server
	Sentinel = "sentinel" // primary, replicas, sentinels
	Redlock  = "redlock"  // N independent redis-servers
	Etcd     = "etcd"     // N etcd members (raft), the consensus baseline
	// RedisCluster is Redis Cluster: primaries that share the hash slots,
	// each with one replica, failing over by their own election.
	RedisCluster = "cluster"
)

// DefaultNodes is the number of nodes of a system when none is asked for
// (1 for an unknown system).
func DefaultNodes(system string) int {
	if d, err := LookupSystem(system); err == nil {
		return d.DefaultNodes
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
	// Faults are the faults the run injects (nemesis names), so that a
	// backend can refuse, before anything starts, one it cannot land on
	// the system (Fitter).
	Faults []string
	// Processes, when set, is told of every server process a backend that
	// runs local processes has started, again whenever one is restarted
	// with a new PID, so that the caller can record them where a later run
	// finds them if this harness is killed (nodes.json). An error stops
	// the start.
	Processes func(nodes []Node) error

	// Mesh, when set, carries every internal link of the sentinel system
	// (replica→primary, sentinel→node, sentinel↔sentinel): the backend adds
	// an inbound link from "net" to each node and sentinel and makes the
	// cluster address that process only through it, so that cutting one
	// node's inbound link cuts it off from the rest of its cluster while
	// client links (added by the caller) still reach it. The caller owns
	// the mesh and closes it after the cluster. Systems without internal
	// traffic (single, redlock) add no link. On etcd the inbound link of
	// each member carries its raft peer traffic (see local.StartEtcd).
	// Container backends ignore Mesh: their processes cannot reach the
	// host's loopback proxies, so they route internal traffic through a
	// toxiproxy server of their own and let the nemesis cut it through
	// nemesis.InternalNet.
	Mesh Mesh

	// The options below are for the sentinel system only (the
	// min-replicas ones also for Redis Cluster); zero means the default.
	// Other systems reject them.

	// Sentinels is the number of redis-sentinel processes (odd; default
	// DefaultSentinels).
	Sentinels int
	// DownAfter is how long a node must not answer before a sentinel
	// thinks it down (down-after-milliseconds; default DefaultDownAfter).
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout (default
	// DefaultFailoverTimeout).
	FailoverTimeout time.Duration
	// MinReplicasToWrite and MinReplicasMaxLag set the nodes'
	// min-replicas-to-write and min-replicas-max-lag (whole seconds; zero
	// keeps Redis's 10 s).
	MinReplicasToWrite int
	MinReplicasMaxLag  time.Duration
}

// Mesh is where a backend adds the links of a cluster's internal traffic;
// a proxy.Mesh behind it, as in
//
//	spec.Mesh = cluster.MeshFunc(func(from, to, upstream string) (string, error) {
//		l, err := mesh.Add(from, to, upstream, "")
//		if err != nil {
//			return "", err
//		}
//		return l.Addr(), nil
//	})
//
// (This package cannot name *proxy.Mesh: proxy's own tests start real
// servers through this package's backend, and Go forbids the cycle.)
type Mesh interface {
	// AddLink adds the link from `from` to `to` that forwards to upstream
	// and returns the host:port it listens on.
	AddLink(from, to, upstream string) (addr string, err error)
}

// MeshFunc adapts a function to Mesh.
type MeshFunc func(from, to, upstream string) (addr string, err error)

// AddLink calls f.
func (f MeshFunc) AddLink(from, to, upstream string) (string, error) { return f(from, to, upstream) }

// Sentinel defaults: fast enough for a failover to fit in a short run.
const (
	DefaultSentinels       = 3
	DefaultDownAfter       = time.Second
	DefaultFailoverTimeout = 3 * time.Second
	// MasterName is the name the sentinels monitor the primary under.
	MasterName = "lockjepsen"
)

// WithDefaults fills in the sentinel options left at zero. Systems
// without sentinels are returned unchanged.
func (s Spec) WithDefaults() Spec {
	if d, err := LookupSystem(s.System); err != nil || !d.HasSentinels() {
		return s
	}
	if s.Sentinels == 0 {
		s.Sentinels = DefaultSentinels
	}
	if s.DownAfter == 0 {
		s.DownAfter = DefaultDownAfter
	}
	if s.FailoverTimeout == 0 {
		s.FailoverTimeout = DefaultFailoverTimeout
	}
	return s
}

// Role of a node.
const (
	RolePrimary  = "primary"
	RoleReplica  = "replica"
	RoleNode     = "node"
	RoleResource = "resource"
	RoleSentinel = "sentinel"
)

// Node is one server of a running cluster, as clients and reports see it.
type Node struct {
	Name string `json:"name"`
	Role string `json:"role"`
	Addr string `json:"addr"` // host:port that clients dial
	// Announce is the host:port the cluster itself uses for the node
	// (replicaof, sentinel monitor, announced addresses): its inbound
	// "net" link when the spec has a Mesh, else Addr. Sentinels report
	// primaries by this address.
	Announce string `json:"announce,omitempty"`
	PID      int    `json:"pid,omitempty"`
	LogPath  string `json:"log,omitempty"`
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

// The nemesis acts on nodes through small interfaces that a cluster
// implements for what its backend can do; a fault whose interface the
// cluster lacks is refused before the run. Node names are those of
// Nodes().

// Pauser freezes a node's process (SIGSTOP) and continues it.
type Pauser interface {
	Pause(node string) error
	Resume(node string) error
}

// Killer ends a node's process at once (SIGKILL), losing whatever it had
// not persisted, and starts it again on the same address and data. With
// loseUnsynced, the tail of its append-only file written in the last
// second is cut off too, as if the machine had crashed before the fsync.
type Killer interface {
	Kill(node string, loseUnsynced bool) error
	Restart(ctx context.Context, node string) error
}

// ClockSetter moves a node's wall clock to real time + offset; a cluster
// started with Spec.FakeClock implements it.
type ClockSetter interface {
	SetClock(node string, offset time.Duration) error
}

// SentinelCluster is implemented by clusters with Sentinel. Node names are
// those of Nodes() and Sentinels().
type SentinelCluster interface {
	MasterName() string
	Sentinels() []Node
	// Primary asks the sentinels which node is the primary now (majority
	// answer), by node name.
	Primary(ctx context.Context) (string, error)
	// WaitHealthy polls until every replica is connected and in sync with
	// the primary the sentinels agree on, and every sentinel knows every
	// replica and the other sentinels; used before clients start and after
	// healing.
	WaitHealthy(ctx context.Context) error
	// Failover asks the sentinels for a manual failover (SENTINEL
	// FAILOVER) and returns once a new primary is reported.
	Failover(ctx context.Context) (newPrimary string, err error)
}

// Redis Cluster: the primaries split the 16384 hash slots evenly, n1..nP
// in order, and node nP+i replicates node ni. Cluster nodes fail over by
// their own election, with no sentinel; these settings make one fit in a
// short run.
const (
	// MinClusterPrimaries is the fewest primaries a Redis Cluster takes:
	// a failover needs the votes of a majority of the primaries.
	MinClusterPrimaries = 3
	// ClusterNodeTimeout is cluster-node-timeout: how long a node must
	// not answer before its peers count it failing.
	ClusterNodeTimeout = time.Second
	// ClusterSlots is the number of hash slots.
	ClusterSlots = 16384
)

// SlotCluster is implemented by Redis Cluster deployments. Node names are
// those of Nodes().
type SlotCluster interface {
	// PrimaryOf asks the nodes which one serves key's hash slot now: of
	// the nodes that claim it, the one with the highest config epoch.
	PrimaryOf(ctx context.Context, key string) (string, error)
	// WaitHealthy polls until every node reports the cluster state ok
	// with every slot covered, every primary has its replica, and every
	// replica is in sync; used before clients start and after healing.
	WaitHealthy(ctx context.Context) error
}

// Backend starts clusters.
type Backend interface {
	Name() string
	Start(ctx context.Context, spec Spec) (Cluster, error)
}

// Fitter is a backend that runs a given deployment (the ssh backend's
// hosts file) and can say before anything starts whether a spec fits it;
// the harness refuses one that does not as bad usage.
type Fitter interface {
	Fit(spec Spec) error
}

// OrphanReaper is a backend that can find and remove what runs of earlier,
// killed harness processes left behind (containers, networks): SIGKILL
// gives a harness no chance to clean up, so the next run does it. It
// returns one line per thing removed, for the user; it never touches what
// a live harness process owns.
type OrphanReaper interface {
	ReapOrphans(ctx context.Context) []string
}

// Validate checks a spec before anything is started, by the rules of its
// system's descriptor.
func (s Spec) Validate() error {
	d, err := LookupSystem(s.System)
	if err != nil {
		return err
	}
	if err := d.CheckNodes(s.Nodes); err != nil {
		return fmt.Errorf("system %q %w", s.System, err)
	}
	if d.HasSentinels() {
		if err := s.validateSentinel(); err != nil {
			return err
		}
	}
	if d.OwnPersistence != "" && s.Persistence != PersistNone {
		return fmt.Errorf("system %q always persists (%s): persistence %q is for the Redis systems", s.System, d.OwnPersistence, s.Persistence)
	}
	if d.NoWallClock != "" && s.FakeClock {
		return fmt.Errorf("system %q: clock faults are not supported on %s: %s", s.System, d.Name, d.NoWallClock)
	}
	if !d.HasSentinels() && (s.Sentinels != 0 || s.DownAfter != 0 || s.FailoverTimeout != 0) {
		return fmt.Errorf("system %q has no sentinels: sentinel options are for system %s only", s.System, orList(systemsWith(System.HasSentinels)))
	}
	if !d.FailsOver() && (s.MinReplicasToWrite != 0 || s.MinReplicasMaxLag != 0) {
		return fmt.Errorf("system %q has no replicas: min-replicas options are for systems %s", s.System, andList(systemsWith(System.FailsOver)))
	}
	if d.FailsOver() && !d.HasSentinels() {
		if err := s.validateMinReplicas(s.Replicas()); err != nil {
			return err
		}
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

// systemsWith lists the registered systems that have a capability, each
// quoted.
func systemsWith(has func(System) bool) []string {
	var names []string
	for _, d := range AllSystems() {
		if has(d) {
			names = append(names, strconv.Quote(d.Name))
		}
	}
	return names
}

// orList joins names as "a, b or c"; andList as "a, b and c".
func orList(names []string) string  { return joinLast(names, " or ") }
func andList(names []string) string { return joinLast(names, " and ") }

func joinLast(names []string, last string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + last + names[len(names)-1]
}

func (s Spec) validateSentinel() error {
	d := s.WithDefaults()
	if d.Sentinels < 1 || d.Sentinels%2 == 0 {
		return fmt.Errorf("system %q needs an odd number of sentinels, at least 1, not %d", s.System, d.Sentinels)
	}
	// Sentinel takes both timings in whole milliseconds, and reads its
	// configuration file's with atoi: past 2^31-1 ms (24.8 days) the value
	// wraps and Sentinel refuses to start. No run lasts more than a day.
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"down-after", d.DownAfter}, {"failover-timeout", d.FailoverTimeout}} {
		if t.d < time.Millisecond || t.d > MaxSentinelTiming || t.d%time.Millisecond != 0 {
			return fmt.Errorf("sentinel %s %v must be a whole number of milliseconds between 1ms and %v", t.name, t.d, MaxSentinelTiming)
		}
	}
	return d.validateMinReplicas(d.Replicas())
}

// MaxSentinelTiming bounds down-after and failover-timeout.
const MaxSentinelTiming = 24 * time.Hour

// Replicas is how many replicas each primary of the spec has, by its
// system's descriptor: every node but the primary on Sentinel, one on
// Redis Cluster, none where the system does not replicate.
func (s Spec) Replicas() int {
	if d, err := LookupSystem(s.System); err == nil && d.FailsOver() {
		return d.Replicas(s.Nodes)
	}
	return 0
}

// validateMinReplicas checks the min-replicas options against the number
// of replicas each primary has.
func (s Spec) validateMinReplicas(replicas int) error {
	if s.MinReplicasToWrite < 0 || s.MinReplicasToWrite > replicas {
		return fmt.Errorf("min-replicas-to-write %d must be between 0 and the number of replicas (%d)", s.MinReplicasToWrite, replicas)
	}
	// Redis counts the lag in whole seconds; a fraction would be silently
	// rounded, and 0 disables the check altogether.
	if s.MinReplicasMaxLag < 0 || s.MinReplicasMaxLag%time.Second != 0 {
		return fmt.Errorf("min-replicas-max-lag %v must be a whole number of seconds", s.MinReplicasMaxLag)
	}
	return nil
}

// MinReplicasArgs are the redis-server options of the spec's min-replicas
// settings, for every node of a replicated system on any backend.
func (s Spec) MinReplicasArgs() []string {
	if s.MinReplicasToWrite == 0 {
		return nil
	}
	a := []string{"--min-replicas-to-write", strconv.Itoa(s.MinReplicasToWrite)}
	if s.MinReplicasMaxLag > 0 {
		a = append(a, "--min-replicas-max-lag", strconv.Itoa(int(s.MinReplicasMaxLag/time.Second)))
	}
	return a
}

// RunReaper is a backend that can clean up after one run of an earlier,
// killed harness in this store: nodes are the processes that run listed
// (its nodes.json). It returns one line per thing it removed, for the
// user, and never touches a process that is not the run's own.
type RunReaper interface {
	ReapRun(dir string, nodes []Node) []string
}

// defaultBackend is the backend of a run whose configuration names none.
var defaultBackend struct {
	sync.Mutex
	b Backend
}

// SetDefaultBackend makes b the backend of runs whose configuration names
// none. The local backend's package sets itself when it is imported, as
// database/sql's drivers register, so that the harness reaches backends
// only through this interface.
func SetDefaultBackend(b Backend) {
	defaultBackend.Lock()
	defer defaultBackend.Unlock()
	defaultBackend.b = b
}

// DefaultBackend is the backend of runs whose configuration names none,
// or nil when no package has set one.
func DefaultBackend() Backend {
	defaultBackend.Lock()
	defer defaultBackend.Unlock()
	return defaultBackend.b
}
