package locks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/internal/registry"
)

// Descriptor is one lock: what it is, where it runs and how to build it.
// Each lock declares its descriptor once, next to its implementation; the
// CLI's help, validation, the matrix grid and reports loop over All, so a
// new lock is its own file and one list entry.
type Descriptor struct {
	Name string
	// Description is one line for help and reports.
	Description string
	// Nodes is how many nodes the lock runs on, as the system presents
	// them to it: a Sentinel system presents its primary only.
	Nodes NodeCount
	// Systems are the systems the lock runs on.
	Systems []string
	// DialsAddr: the lock makes its own client of each Conn.Addr (etcd);
	// the others use Conn.Client.
	DialsAddr bool
	// BackgroundRenewal: the lock keeps its lease alive from a background
	// task, so a holder has no deadline of its own.
	BackgroundRenewal bool
	// Fences: every grant carries a fencing token.
	Fences bool
	// ServerKey is the key the lock keeps on the servers for a lock key,
	// when it is not the key itself (rueidislock's <prefix>:0:<key>): on
	// Redis Cluster its slot's primary is the one faults aimed at the
	// lock's primary hit, and the one a grant names. Nil: the key itself.
	ServerKey func(key string) string
	// New builds the lock on nodes; New (the function) has already
	// checked the node count, the nodes' connections and the options.
	New func(nodes []Conn, opts Options) (Locker, error)
}

// Fits reports whether the lock runs on the named system when it presents
// n nodes to the lock.
func (d Descriptor) Fits(system string, n int) bool {
	return slices.Contains(d.Systems, system) && d.Nodes.Allows(n)
}

// builtin lists the locks of this module, in the order help lists them.
var builtin = []Descriptor{tokenLock, setnxDelLock, setnxNoTTLLock, fencedLock, waitLock, redlockLock}

// known is builtin, then the locks registered from other modules.
var known = registry.New("lock", func(d Descriptor) string { return d.Name }, builtin...)

// redisSystems are the systems whose nodes are Redis servers.
var redisSystems = []string{cluster.Single, cluster.Sentinel, cluster.Redlock}

// Register adds locks that live outside this module (library adapters,
// whose dependencies a user of this module must not inherit). A name
// already known is refused.
func Register(ds ...Descriptor) error {
	for _, d := range ds {
		if d.Name == "" || d.New == nil || len(d.Systems) == 0 {
			return fmt.Errorf("register lock %q: a lock needs a name, systems and a constructor", d.Name)
		}
		if err := known.Add(d); err != nil {
			return err
		}
	}
	return nil
}

// All lists every known lock: this module's, then the registered ones.
func All() []Descriptor { return known.All() }

// Names lists the names of All.
func Names() []string {
	var names []string
	for _, d := range All() {
		names = append(names, d.Name)
	}
	return names
}

// NamesFor lists the locks that run on the named system.
func NamesFor(system string) []string {
	var names []string
	for _, d := range All() {
		if slices.Contains(d.Systems, system) {
			names = append(names, d.Name)
		}
	}
	return names
}

// Lookup returns the named lock's descriptor, or an error naming the known
// locks.
func Lookup(name string) (Descriptor, error) {
	d, ok := known.Get(name)
	if !ok {
		return Descriptor{}, fmt.Errorf("unknown lock %q; want one of %s", name, strings.Join(Names(), ", "))
	}
	return d, nil
}

// Conn is one node as a lock sees it.
type Conn struct {
	// Name identifies the node in errors and in NodeReporter.GrantedBy.
	Name   string
	Client redis.UniversalClient
	// Addr is the node's client address (host:port) for locks that dial
	// it themselves (Descriptor.DialsAddr). Redis locks use Client.
	Addr string
	// Sentinel, on a system whose primary the sentinels name, is how a
	// lock that makes its own Sentinel client (a library's lock on its
	// own client) finds the primary, as Client does; nil elsewhere.
	Sentinel *SentinelConn
}

// SentinelConn is what a Sentinel client is given: the sentinels, the
// name they monitor the primary by, and the dialer of the harness's
// client, which sends each connection through that client's own link to
// the node or sentinel an address names (the sentinels report the
// addresses the nodes use among themselves).
type SentinelConn struct {
	MasterName string
	Addrs      []string
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Options configures a lock built by New. Zero values mean the defaults;
// an option a lock has no use for is ignored.
type Options struct {
	// TokenPrefix makes tokens unique per client (every lock); a counter
	// makes them unique per grant.
	TokenPrefix string
	// WaitReplicas and WaitTimeout are the wait lock's WAIT arguments
	// (default 1 replica, 100ms).
	WaitReplicas int
	WaitTimeout  time.Duration
	// DriftFactor: redlock and redsync subtract TTL×DriftFactor (+2 ms for
	// redlock; redsync adds no constant) from the validity. Default 0.01.
	DriftFactor float64
	// Tries: attempts per TryAcquire for redlock and redsync. Default 1,
	// because the harness's workload retries and records every attempt.
	Tries int
	// NodeTimeout bounds each node's answer during acquisition (redlock:
	// also release and extend). redlock default min(TTL/10, 50ms); redsync
	// default its own timeout factor, 5% of the TTL.
	NodeTimeout time.Duration
	// RetryDelay is the longest random wait between tries (Tries > 1).
	// redlock default 50ms; redsync default its own 50–250ms.
	RetryDelay time.Duration
	// Clock is redlock's clock for measuring elapsed time (default real
	// time), so that client clock drift can be injected.
	Clock Clock
}

// NodeCount is how many nodes a lock runs on.
type NodeCount struct {
	Min, Max int  // Max 0: no upper limit
	Odd      bool // a majority quorum needs an odd count to tolerate (N-1)/2 failures
}

func (c NodeCount) String() string {
	switch {
	case c.Min == c.Max:
		return fmt.Sprintf("exactly %d node(s)", c.Min)
	case c.Odd && c.Max == 0:
		return fmt.Sprintf("an odd number of nodes ≥ %d", c.Min)
	case c.Max == 0:
		return fmt.Sprintf("at least %d nodes", c.Min)
	default:
		return fmt.Sprintf("%d to %d nodes", c.Min, c.Max)
	}
}

// Allows reports whether n nodes fit.
func (c NodeCount) Allows(n int) bool {
	return n >= c.Min && (c.Max == 0 || n <= c.Max) && (!c.Odd || n%2 == 1)
}

// Node counts the locks declare.
var (
	SingleNode = NodeCount{Min: 1, Max: 1}
	Majority   = NodeCount{Min: 3, Odd: true}
	// RaftMembers: an odd number of members; one is a cluster too (no
	// failure tolerated, but the same API).
	RaftMembers = NodeCount{Min: 1, Odd: true}
)

// NodesFor reports how many nodes the named lock runs on, so that a CLI can
// check --lock against --system before starting anything.
func NodesFor(name string) (NodeCount, error) {
	d, err := Lookup(name)
	return d.Nodes, err
}

// CheckNodes returns a clear error when the named lock cannot run on n
// nodes.
func CheckNodes(name string, n int) error {
	d, err := Lookup(name)
	if err != nil {
		return err
	}
	return d.checkNodes(n)
}

func (d Descriptor) checkNodes(n int) error {
	if d.Nodes.Allows(n) {
		return nil
	}
	if d.Nodes == SingleNode {
		var multi []string
		for _, o := range All() {
			if o.Nodes == Majority { // a quorum of independent nodes
				multi = append(multi, o.Name)
			}
		}
		return fmt.Errorf("lock %q is a single-instance lock and needs exactly 1 node, but the system has %d; "+
			"run it on a single-node system, or use a multi-node lock (%s)", d.Name, n, strings.Join(multi, ", "))
	}
	return fmt.Errorf("lock %q needs %s (a majority quorum), but the system has %d", d.Name, d.Nodes, n)
}

// New builds the named lock on the system's nodes. It refuses a lock that
// does not fit the node count (see NodesFor), a node without the
// connection the lock uses, and options out of range.
func New(name string, nodes []Conn, opts Options) (Locker, error) {
	d, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if err := d.checkNodes(len(nodes)); err != nil {
		return nil, err
	}
	for i, n := range nodes {
		switch {
		case d.DialsAddr && n.Addr == "":
			return nil, fmt.Errorf("lock %q: node %d (%q) has no address", name, i+1, n.Name)
		case !d.DialsAddr && n.Client == nil:
			return nil, fmt.Errorf("lock %q: node %d (%q) has no client", name, i+1, n.Name)
		}
	}
	if opts.DriftFactor < 0 || opts.DriftFactor >= 1 {
		return nil, fmt.Errorf("lock %q: drift factor %v is outside [0, 1)", name, opts.DriftFactor)
	}
	if opts.Tries < 0 || opts.NodeTimeout < 0 || opts.RetryDelay < 0 {
		return nil, fmt.Errorf("lock %q: tries, node timeout and retry delay must not be negative", name)
	}
	l, err := d.New(nodes, opts)
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	if l == nil {
		return nil, fmt.Errorf("lock %q: %w", name, errors.New("the constructor returned no lock"))
	}
	return l, nil
}

// NilOnErr turns a constructor's concrete result into a Locker, so that a
// nil pointer with an error does not become a non-nil Locker.
func NilOnErr[L Locker](l L, err error) (Locker, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Info is what a lock is, in words and properties, for help and reports.
type Info struct {
	Description       string
	BackgroundRenewal bool
	Fences            bool
}

// Describe tells what the named lock is; an unknown name gets an empty
// description.
func Describe(name string) Info {
	d, _ := Lookup(name)
	return Info{Description: d.Description, BackgroundRenewal: d.BackgroundRenewal, Fences: d.Fences}
}
