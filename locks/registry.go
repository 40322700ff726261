package locks

import (
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Names of the multi-node locks and of the library adapters.
const (
	RedlockName   = "redlock"   // our implementation of the published Redlock algorithm
	RedsyncName   = "redsync"   // github.com/go-redsync/redsync/v4, a Redlock library
	RedislockName = "redislock" // github.com/bsm/redislock, a single-instance library
	EtcdName      = "etcd"      // etcd's concurrency.Mutex on a lease, on the etcd system
	// EtcdSessionName is the same with the session's background
	// keep-alive, as applications use it: the holder has no deadline.
	EtcdSessionName = "etcd-session"
)

// AllNames lists every Redis lock New can build, single-instance locks
// first. New also builds EtcdName, which is not listed here: it runs on
// etcd members only (Conn.Addr), and callers iterate AllNames to build
// locks on Redis nodes.
var AllNames = []string{Token, SetnxDel, SetnxNoTTL, Fenced, WaitName, RedislockName, RedlockName, RedsyncName}

// EtcdNames lists the locks of the etcd system.
var EtcdNames = []string{EtcdName, EtcdSessionName}

// Conn is one node as a lock sees it.
type Conn struct {
	// Name identifies the node in errors and in NodeReporter.GrantedBy.
	Name   string
	Client redis.UniversalClient
	// Addr is the node's client address (host:port) for locks that dial
	// it themselves: the etcd lock makes one etcd client of all the
	// nodes' Addr, in order. Redis locks use Client.
	Addr string
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

var (
	singleNode = NodeCount{Min: 1, Max: 1}
	majority   = NodeCount{Min: 3, Odd: true}
	// raft: an odd number of members; one is a cluster too (no failure
	// tolerated, but the same API).
	raftMembers = NodeCount{Min: 1, Odd: true}
)

// NodesFor reports how many nodes the named lock runs on, so that a CLI can
// check --lock against --system before starting anything.
func NodesFor(name string) (NodeCount, error) {
	switch name {
	case Token, SetnxDel, SetnxNoTTL, Fenced, RedislockName, WaitName:
		return singleNode, nil
	case RedlockName, RedsyncName:
		return majority, nil
	case EtcdName, EtcdSessionName:
		return raftMembers, nil
	}
	return NodeCount{}, fmt.Errorf("unknown lock %q; want one of %s", name, strings.Join(append(append([]string{}, AllNames...), EtcdNames...), ", "))
}

// CheckNodes returns a clear error when the named lock cannot run on n
// nodes.
func CheckNodes(name string, n int) error {
	c, err := NodesFor(name)
	if err != nil {
		return err
	}
	if c.Allows(n) {
		return nil
	}
	if c == singleNode {
		return fmt.Errorf("lock %q is a single-instance lock and needs exactly 1 node, but the system has %d; "+
			"run it on a single-node system, or use a multi-node lock (%s, %s)", name, n, RedlockName, RedsyncName)
	}
	return fmt.Errorf("lock %q needs %s (a majority quorum), but the system has %d", name, c, n)
}

// New builds the named lock on the system's nodes. It refuses a lock that
// does not fit the node count (see NodesFor).
func New(name string, nodes []Conn, opts Options) (Locker, error) {
	if err := CheckNodes(name, len(nodes)); err != nil {
		return nil, err
	}
	for i, n := range nodes {
		if name == EtcdName || name == EtcdSessionName {
			if n.Addr == "" {
				return nil, fmt.Errorf("lock %q: node %d (%q) has no address", name, i+1, n.Name)
			}
			continue
		}
		if n.Client == nil {
			return nil, fmt.Errorf("lock %q: node %d (%q) has no client", name, i+1, n.Name)
		}
	}
	if opts.DriftFactor < 0 || opts.DriftFactor >= 1 {
		return nil, fmt.Errorf("lock %q: drift factor %v is outside [0, 1)", name, opts.DriftFactor)
	}
	if opts.Tries < 0 || opts.NodeTimeout < 0 || opts.RetryDelay < 0 {
		return nil, fmt.Errorf("lock %q: tries, node timeout and retry delay must not be negative", name)
	}
	var l Locker
	var err error
	// Each constructor returns its concrete type; a nil pointer must not
	// become a non-nil Locker.
	switch name {
	case RedislockName:
		l, err = nilOnErr(NewRedislock(nodes[0].Client, opts.TokenPrefix))
	case RedlockName:
		l, err = nilOnErr(NewRedlock(nodes, RedlockOptions{
			TokenPrefix: opts.TokenPrefix, DriftFactor: opts.DriftFactor, Tries: opts.Tries,
			NodeTimeout: opts.NodeTimeout, RetryDelay: opts.RetryDelay, Clock: opts.Clock,
		}))
	case RedsyncName:
		l, err = nilOnErr(NewRedsync(nodes, opts))
	case EtcdName, EtcdSessionName:
		l, err = nilOnErr(NewEtcdLock(nodes, EtcdOptions{TokenPrefix: opts.TokenPrefix, KeepAlive: name == EtcdSessionName}))
	case WaitName:
		replicas, timeout := opts.WaitReplicas, opts.WaitTimeout
		if replicas == 0 {
			replicas = 1
		}
		if timeout == 0 {
			timeout = 100 * time.Millisecond
		}
		l, err = nilOnErr(NewWaitLock(nodes[0].Client, opts.TokenPrefix, replicas, timeout))
	default:
		l, err = nilOnErr(NewRedisLock(nodes[0].Client, name, opts.TokenPrefix))
	}
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", name, err)
	}
	return l, nil
}

func nilOnErr[L Locker](l L, err error) (Locker, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Info is what a lock is, in words and properties, for help and reports.
type Info struct {
	Description string
	// BackgroundRenewal: the lock keeps its lease alive from a background
	// task, so a holder has no deadline of its own.
	BackgroundRenewal bool
}

// Describe tells what the named lock is; an unknown name gets an empty
// description.
func Describe(name string) Info {
	return Info{Description: descriptions[name], BackgroundRenewal: name == EtcdSessionName}
}

var descriptions = map[string]string{
	Token:           "acquire with SET key token NX PX ttl; release with a Lua script that deletes the key only if it still holds our token (the correct single-instance lock)",
	SetnxDel:        "acquire with SET key token NX PX ttl; release with a plain DEL, which deletes the key whoever holds it",
	SetnxNoTTL:      "acquire with SET key token NX and no expiry; release with a Lua compare-and-delete: a holder that dies never releases",
	Fenced:          "acquire with a Lua script that does SET NX PX and INCR key:fence, giving every grant a monotonic fencing token; release with compare-and-delete",
	WaitName:        "acquire with SET NX PX, then WAIT for replicas on the same connection, counting the grant only if enough replicas acknowledged; release with compare-and-delete",
	RedislockName:   "the bsm/redislock library: Obtain (SET NX PX), Release and Refresh by token, on a single Redis",
	RedlockName:     "lockjepsen's implementation of the published Redlock algorithm: SET NX PX on every node, granted with a majority and a positive validity (TTL − elapsed − drift), released everywhere",
	RedsyncName:     "the go-redsync/redsync library, Redlock over every node",
	EtcdName:        "etcd's concurrency.Mutex on a lease of the TTL with no keep-alive: the holder acts only until the lease's end by its own clock; the key's create revision is the fencing token",
	EtcdSessionName: "etcd's concurrency.Session and Mutex as applications use them: the client renews the lease in the background, and the holder believes it holds the lock until it releases; the key's create revision is the fencing token",
}
