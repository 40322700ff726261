package cluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// System describes one system under test, once, for every layer: the
// backends start it from its roles and peers, the harness picks its
// clients and primary monitor from how clients reach it, validation reads
// its rules, and the CLI, the matrix and the reference docs loop over
// Systems. Behaviour hangs on these capabilities, never on the name: a
// new system is its descriptor, one entry in systemList (or a call to
// RegisterSystem) and each backend's start code.
type System struct {
	// Name is the --system value.
	Name string
	// Title says what the system is, for help and the reference.
	Title string
	// DefaultNodes is the number of nodes when none is asked for.
	DefaultNodes int
	// CheckNodes refuses a node count the system cannot be built of, as
	// "needs an odd number of nodes, at least 3, not 4".
	CheckNodes func(n int) error
	// Role is the role node i (from 1) of n starts in; nil: every node
	// is RoleNode.
	Role func(i, n int) string
	// Reach is how clients find the node that serves the lock, and so
	// which clients the harness gives a lock and how it follows the
	// primary.
	Reach Reach
	// Replicas, where the system replicates and fails over by itself, is
	// how many replicas each primary has with n nodes: such a system
	// takes the min-replicas options, and its replicas are asynchronous
	// (a primary answers before its replicas have the write). nil: no
	// replicas.
	Replicas func(n int) int
	// Peers says what the nodes say to each other ("replication and the
	// sentinels"); those links run through the mesh so that faults can
	// cut them. "": the nodes are independent.
	Peers string
	// Majority: the nodes are independent and a lock needs a majority of
	// them to grant (Redlock): faults aim at the holder's nodes, and the
	// checkers count grants by fewer.
	Majority bool
	// Server is the server the nodes run (ServerRedis, ServerEtcd), whose
	// version run.json records.
	Server string
	// OwnPersistence says why Redis's persistence options do not apply
	// ("" where they do).
	OwnPersistence string
	// NoWallClock says why faults that move the nodes' wall clocks do not
	// reach the system's leases ("" where they do); the fake clock is
	// refused there.
	NoWallClock string
	// ClockTimeouts says why moving a node's wall clock while the run goes
	// on breaks the system itself ("" where it does not): only a clock
	// moved once, before the first grant, is fair there.
	ClockTimeouts string
	// ServerRenewsLeases says why the servers may keep a key past its TTL
	// by themselves, so that the lease model does not judge releases for
	// honesty there; "" where a key lives exactly its TTL.
	ServerRenewsLeases string
	// TTL is the system's rule for lock TTLs; the zero rule takes the
	// harness's default and any TTL.
	TTL TTLRule
	// ReferenceLock is the harness's correct lock on the system: a review
	// runs it as a control.
	ReferenceLock string
	// Layout describes, for a report, a layout the node list does not
	// show (which slots each primary serves); nil where it shows all.
	Layout func(nodes []Node) string
	// StartOverhead is how long start-up, stop, check and report take
	// beyond the run on a 2-core machine (0: 1.5 s), for budgets.
	StartOverhead time.Duration
}

// Reach is how clients find the node that serves the lock.
type Reach int

const (
	// ReachEveryNode: a Redis client to each node; the lock sees them all.
	ReachEveryNode Reach = iota
	// ReachAddresses: the lock dials each node's address itself (etcd),
	// so a paused client's own background traffic stops only when its
	// links are cut.
	ReachAddresses
	// ReachSentinels: the sentinels name the primary (SentinelCluster);
	// the lock sees one client that follows failovers.
	ReachSentinels
	// ReachSlots: the nodes say which primary serves a key's hash slot
	// (SlotCluster); the lock sees one cluster client.
	ReachSlots
)

// Servers a system's nodes run.
const (
	ServerRedis = "redis"
	ServerEtcd  = "etcd"
)

// TTLRule is a system's rule for lock TTLs.
type TTLRule struct {
	// Default is the TTL a run takes when none is given; 0 is the
	// harness's.
	Default time.Duration
	// Unit: the system's leases count in whole multiples of it, at least
	// one; 0 takes any TTL.
	Unit time.Duration
	// Why says what the leases count in, for help and errors: "whole
	// seconds".
	Why string
}

// Refuses reports whether the rule refuses ttl.
func (r TTLRule) Refuses(ttl time.Duration) bool {
	return r.Unit > 0 && (ttl < r.Unit || ttl%r.Unit != 0)
}

// LockNodes is how many nodes a lock sees when the system has n: one
// connection where clients follow a primary, else every node.
func (s System) LockNodes(n int) int {
	if s.FollowsPrimary() {
		return 1
	}
	return n
}

// FollowsPrimary: clients follow the primary the system names (Sentinel,
// Redis Cluster).
func (s System) FollowsPrimary() bool { return s.Reach == ReachSentinels || s.Reach == ReachSlots }

// FailsOver: the system promotes a replica by itself.
func (s System) FailsOver() bool { return s.Replicas != nil }

// HasSentinels: the system runs sentinels and takes their options.
func (s System) HasSentinels() bool { return s.Reach == ReachSentinels }

// NodeRole is the role node i (from 1) of n starts in.
func (s System) NodeRole(i, n int) string {
	if s.Role == nil {
		return RoleNode
	}
	return s.Role(i, n)
}

// systemList lists every system, in the order help and reports list them.
var systemList = []System{singleSystem, sentinelSystem, redlockSystem, etcdSystem, redisClusterSystem}

// registry is systemList and the systems registered after it.
var registry = struct {
	sync.Mutex
	systems []System
}{systems: slices.Clone(systemList)}

// Systems lists the systems' names, in the order help and reports list
// them.
var Systems = SystemNames()

// SystemNames lists the registered systems' names, in order.
func SystemNames() []string {
	registry.Lock()
	defer registry.Unlock()
	var names []string
	for _, s := range registry.systems {
		names = append(names, s.Name)
	}
	return names
}

// AllSystems returns every registered system's descriptor, in order.
func AllSystems() []System {
	registry.Lock()
	defer registry.Unlock()
	return slices.Clone(registry.systems)
}

// LookupSystem returns the named system's descriptor.
func LookupSystem(name string) (System, error) {
	all := AllSystems()
	if i := slices.IndexFunc(all, func(s System) bool { return s.Name == name }); i >= 0 {
		return all[i], nil
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	return System{}, fmt.Errorf("unknown system %q (want %s)", name, strings.Join(names, ", "))
}

// RegisterSystem adds a system to the list, after the built-in ones; a
// program (or a test) that brings a system of its own calls it from init,
// before anything lists the systems. The faults' lists of systems are
// read from the descriptors when package nemesis is initialised, so a
// system registered after that takes only the faults that name no
// systems. It panics on a duplicate name or a descriptor without a node
// rule, as registries of programming errors do.
func RegisterSystem(s System) {
	registry.Lock()
	defer registry.Unlock()
	if slices.ContainsFunc(registry.systems, func(o System) bool { return o.Name == s.Name }) {
		panic(fmt.Sprintf("cluster: system %q registered twice", s.Name))
	}
	if s.Name == "" || s.DefaultNodes < 1 || s.CheckNodes == nil {
		panic(fmt.Sprintf("cluster: system %q needs a name, a default node count and CheckNodes", s.Name))
	}
	registry.systems = append(registry.systems, s)
	Systems = append(slices.Clip(Systems), s.Name)
}

// Descriptor is the spec's system's descriptor; the zero System (no
// capabilities) for an unknown system, which Validate refuses.
func (s Spec) Descriptor() System {
	d, _ := LookupSystem(s.System)
	return d
}
