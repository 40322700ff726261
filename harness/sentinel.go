package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/history"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/nemesis"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// newLock builds the lock under test on conns: the user's, or a named one
// (an external client is built by externalLockerFactory).
func (r *runner) newLock(conns []locks.Conn, process int) (locks.Locker, error) {
	if r.cfg.Locker != nil {
		return r.cfg.Locker(conns, process)
	}
	return locks.New(r.cfg.Lock, conns, r.lockOptions(process))
}

// newLockOn builds the lock under test on one client that finds the
// primaries itself (Sentinel's failover client, a cluster client), with
// every command stamped when sent; the client is closed if the lock
// cannot be built on it.
func (r *runner) newLockOn(conn locks.Conn, process int) (locks.Locker, error) {
	conn.Client.AddHook(workloads.SendHook{})
	l, err := r.newLock([]locks.Conn{conn}, process)
	if err != nil {
		conn.Client.Close()
		return nil, err
	}
	return l, nil
}

func (r *runner) lockOptions(process int) locks.Options {
	return locks.Options{TokenPrefix: fmt.Sprintf("p%d", process), DriftFactor: r.cfg.DriftFactor,
		Tries: r.cfg.LockTries, NodeTimeout: r.cfg.NodeTimeout, WaitReplicas: r.cfg.WaitReplicas, WaitTimeout: r.cfg.WaitTimeout}
}

// failoverLockerFactory gives each client process a go-redis failover
// client: it asks the sentinels for the primary and follows failovers, as
// applications on Sentinel do. Its dialer sends every connection through
// the client's own link to that node or sentinel when there are links, so
// that a network fault can split clients between two primaries.
func (r *runner) failoverLockerFactory(mesh *proxy.Mesh, targets []cluster.Node) workloads.LockerFactory {
	byAddr := addrIndex(targets)
	var sentinelAddrs []string
	for _, n := range targets {
		if n.Role == cluster.RoleSentinel {
			sentinelAddrs = append(sentinelAddrs, n.Addr)
		}
	}
	return func(process int) (locks.Locker, io.Closer, error) {
		var serving atomic.Value // name of the node the client's data connections go to
		dial := linkDialer(mesh, byAddr, process%r.cfg.Clients, func(n cluster.Node) {
			if n.Role != cluster.RoleSentinel {
				serving.Store(n.Name)
			}
		})
		o := r.clientOptions("", 2)
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cluster.MasterName, SentinelAddrs: sentinelAddrs, Dialer: dial,
			MaxRetries: o.MaxRetries, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout,
			WriteTimeout: o.WriteTimeout, ContextTimeoutEnabled: true, PoolSize: o.PoolSize,
			DisableIdentity: true,
		})
		// A lock that makes its own Sentinel client (a library's) is
		// given the same sentinels and dialer.
		l, err := r.newLockOn(locks.Conn{Name: "primary", Client: rdb, Sentinel: &locks.SentinelConn{
			MasterName: cluster.MasterName, Addrs: sentinelAddrs, Dial: dial}}, process)
		if err != nil {
			return nil, nil, err
		}
		var closer io.Closer = rdb
		if c, ok := l.(io.Closer); ok {
			// A lock with clients of its own (rueidislock's) closes them:
			// servedBy hides its Close, and a crashed holder's lease
			// would otherwise renew for ever and the run never end.
			closer = closeAll{c, rdb}
		}
		// The failover client drops its connections on a failover and
		// dials the new primary, so the node it last dialed is the one
		// that granted: the witness can then show two holders on two
		// primaries.
		return servedBy{l, func(context.Context, string) []string {
			if n, ok := serving.Load().(string); ok {
				return []string{n}
			}
			return nil
		}, nil}, closer, nil
	}
}

// addrIndex maps every address a node is known by, its own and the one
// the cluster announces for it, to the node.
func addrIndex(nodes []cluster.Node) map[string]cluster.Node {
	byAddr := map[string]cluster.Node{}
	for _, n := range nodes {
		byAddr[n.Addr] = n
		if n.Announce != "" {
			byAddr[n.Announce] = n
		}
	}
	return byAddr
}

// linkDialer is the dialer of a client that learns its nodes' addresses
// from the cluster (sentinels, slots): a node known by either address is
// dialed through the worker's own link to it when there is one, else
// directly, never through the cluster's internal link. dialing, if set, is
// told of each node dialed.
func linkDialer(mesh *proxy.Mesh, byAddr map[string]cluster.Node, worker int, dialing func(cluster.Node)) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if n, ok := byAddr[addr]; ok {
			if dialing != nil {
				dialing(n)
			}
			addr = n.Addr
			if link := mesh.Find(nemesis.ClientLinkName(worker), n.Name); link != nil {
				addr = link.Addr()
			}
		}
		return d.DialContext(ctx, network, addr)
	}
}

// servedBy tags a single-node lock's leases with the node that served
// them (for a key).
type servedBy struct {
	locks.Locker
	node func(ctx context.Context, key string) []string
	// serverKey is the lock's own key of a lock key (Descriptor.ServerKey),
	// nil for the key itself.
	serverKey func(string) string
}

func (s servedBy) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l, err := s.Locker.TryAcquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	if _, ok := l.(locks.NodeReporter); ok {
		return l, nil
	}
	if s.serverKey != nil {
		key = s.serverKey(key) // the lock's own key, in its own slot
	}
	if r, ok := l.(locks.Revocable); ok {
		started, _ := l.(locks.Started)
		return servedRevocable{servedLease{l, s.node(ctx, key)}, r, started}, nil
	}
	return servedLease{l, s.node(ctx, key)}, nil
}

// servedRevocable is a servedLease that keeps its lock's acts and stamp
// in sight (locks.Revocable, locks.Started).
type servedRevocable struct {
	servedLease
	r       locks.Revocable
	started locks.Started
}

func (l servedRevocable) Acts() <-chan locks.Act { return l.r.Acts() }

func (l servedRevocable) StartedAt() time.Time {
	if l.started == nil {
		return time.Time{}
	}
	return l.started.StartedAt()
}

type servedLease struct {
	locks.Lease
	nodes []string
}

func (l servedLease) GrantedBy() []string { return l.nodes }

// Failover is a change of primary the sentinels reported (run.json).
type Failover = runfile.Failover

// primarySource is where a system says which node is primary now, and
// whether it is healthy again after a fault.
type primarySource struct {
	who, what string // "the sentinels", "primary": for the events' details
	// key is the key whose primary this is (Redis Cluster: its slot's),
	// "" when one primary serves every key.
	key     string
	primary func(context.Context) (string, error)
	healthy func(context.Context) error
}

// primaryMonitor asks which node is primary every 100ms and records every
// change as a "primary" event in the history, so that the timeline shows
// which node was primary when.
type primaryMonitor struct {
	src *primarySource
	rec *history.Recorder

	mu        sync.Mutex
	primary   string
	lastFault string
	lastStart time.Time
	changes   []Failover
}

func newPrimaryMonitor(src *primarySource, rec *history.Recorder, initial string) *primaryMonitor {
	m := &primaryMonitor{src: src, rec: rec, primary: initial}
	rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: "primary", Key: m.src.key,
		Value: &history.Value{Phase: "start", Targets: []string{initial}, Detail: initial + " is primary at the start"}})
	return m
}

func (m *primaryMonitor) current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.primary
}

// faultEvent remembers when the latest fault began, to time failovers:
// from the moment it is applied, since a manual failover's start is
// recorded only once the failover is over.
func (m *primaryMonitor) faultEvent(f, phase string, nodes []string) {
	if phase != nemesis.PhaseStarting {
		return
	}
	m.mu.Lock()
	m.lastFault = fmt.Sprintf("%s on %v", f, nodes)
	m.lastStart = time.Now()
	m.mu.Unlock()
}

func (m *primaryMonitor) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.mu.Lock()
			p := m.primary
			m.mu.Unlock()
			m.rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: "primary", Key: m.src.key,
				Value: &history.Value{Phase: "stop", Targets: []string{p}}})
			return
		case <-t.C:
		}
		m.poll(ctx)
	}
}

// grantedBy checks at once, before the grant is recorded, whether a
// single node that granted a lease and is not the primary the monitor
// knows has become primary: a client that learnt of a failover between
// two polls would otherwise be granted by the new primary before the
// history says it is one, and the checkers would call it deposed.
func (m *primaryMonitor) grantedBy(ctx context.Context, key string, nodes []string) {
	if len(nodes) != 1 || nodes[0] == m.current() || (m.src.key != "" && key != m.src.key) {
		return
	}
	m.poll(ctx)
}

// poll asks which node is primary and records a change.
func (m *primaryMonitor) poll(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	p, err := m.src.primary(qctx)
	cancel()
	if err != nil || p == "" {
		return
	}
	m.mu.Lock()
	old := m.primary
	if p == old {
		m.mu.Unlock()
		return
	}
	m.primary = p
	f := Failover{At: m.rec.Now(), From: old, To: p}
	detail := fmt.Sprintf("%s name %s %s (was %s)", m.src.who, p, m.src.what, old)
	if !m.lastStart.IsZero() {
		f.AfterFault, f.Duration = m.lastFault, int64(time.Since(m.lastStart))
		detail += fmt.Sprintf(", %s after %s started", time.Since(m.lastStart).Round(time.Millisecond), m.lastFault)
	}
	m.changes = append(m.changes, f)
	m.mu.Unlock()
	m.rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: "primary", Key: m.src.key,
		Value: &history.Value{Phase: "stop", Targets: []string{old}}})
	m.rec.Record(history.Op{Process: history.NemesisProcess, Type: history.Info, F: "primary", Key: m.src.key,
		Value: &history.Value{Phase: "start", Targets: []string{p}, Detail: detail}})
}

func (m *primaryMonitor) failovers() []Failover {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Failover(nil), m.changes...)
}
