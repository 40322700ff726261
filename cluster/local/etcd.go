package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/etcdq"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// The etcd system: N etcd members (Debian's etcd-server, the real binary,
// one process each) on loopback, forming one raft cluster. Each member
// keeps its data directory and log under Dir/nodes/<name>; its client URL
// is http://127.0.0.1:<port> (Node.Addr) and its peer URL is either its
// own peer port or, with Spec.Mesh, its inbound "net" link (Node.Announce).
//
// The peer network with a mesh. etcd's peer transport (rafthttp) keeps
// connections that either member of a pair may have dialled: a member
// writes its raft messages into streams its peers dialled in to it, reads
// theirs from streams it dialled out, and falls back to POSTs it dials
// itself when a stream is down. An inbound link per member alone would
// therefore not isolate it (cutting it only stops the connections the
// others dial, and the member goes on talking over the ones it dials), so
// every peer connection crosses the inbound links of both its ends:
//
//	member j ──► link net→i ──► router i ──► link net→j ──► router j ──► member i
//
// Router i (an HTTP relay of this package, one per member, the upstream of
// link net→i) sees from the request's X-PeerURLs header that member j
// dialled, and sends the request back out through j's own inbound link,
// marked for delivery to member i's peer port; router j delivers it.
// Requests that name no member (etcd's version and probing checks) go
// straight to the member. So a partition of "net"→i cuts every connection
// into or out of member i, streams and POSTs alike, while links between the
// others are untouched and clients (which have their own links to the
// client port) still reach it; latency on "net"→i slows every reply to and
// from i. Node.Announce is the inbound link, the peer URL the members use.

// ErrMissingEtcd is returned when the etcd binary cannot be found.
var ErrMissingEtcd = errors.New("etcd not found")

// Timings of the etcd members. Faster than etcd's defaults (100 ms,
// 1000 ms) so that a failover fits in a short run; with them the shortest
// lease etcd grants is 1 s (it raises any TTL below 1.5 election timeouts,
// rounded up to whole seconds).
const (
	EtcdHeartbeat       = 50 * time.Millisecond
	EtcdElectionTimeout = 500 * time.Millisecond
	// EtcdMinLeaseTTL is the shortest lease the members grant with these
	// timings.
	EtcdMinLeaseTTL = time.Second

	etcdStopGrace = 2 * time.Second
)

// FindEtcd locates the etcd server binary: $LOCKJEPSEN_ETCD, else the PATH.
func FindEtcd() (string, error) {
	return findBinary("etcd", "LOCKJEPSEN_ETCD", ErrMissingEtcd,
		"the etcd system needs it (Debian/Ubuntu: apt-get install etcd-server)")
}

// EtcdNode is one etcd member process.
type EtcdNode struct {
	Name    string
	Dir     string // node directory: the process's working directory
	DataDir string // Dir/data
	LogPath string // Dir/etcd.log
	// IP is the loopback address the process listens on: one per cluster,
	// not 127.0.0.1, because a port picked free there can be taken by the
	// local end of any outgoing connection before etcd binds it, and the
	// etcd members of parallel runs pick many ports at once.
	IP string
	// ClientPort and PeerPort are where the process listens on IP.
	ClientPort, PeerPort int
	// PeerAnnounce is the host:port the other members dial for this one
	// (its inbound "net" link with a mesh, else its peer port).
	PeerAnnounce string

	binary string
	args   []string

	proc
}

// Addr is the client address, host:port.
func (n *EtcdNode) Addr() string { return net.JoinHostPort(n.IP, strconv.Itoa(n.ClientPort)) }

// PeerAddr is the address the process's peer listener binds.
func (n *EtcdNode) PeerAddr() string { return net.JoinHostPort(n.IP, strconv.Itoa(n.PeerPort)) }

// launch starts the process without waiting for it to be ready.
func (n *EtcdNode) launch() error {
	if n.Running() {
		return fmt.Errorf("node %s is still running", n.Name)
	}
	log, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start node %s: %w", n.Name, err)
	}
	cmd := exec.Command(n.binary, n.args...)
	cmd.Dir = n.Dir
	// etcd reads ETCD_* variables as flags: keep the caller's out.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start node %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
	afterLaunch(n.Dir, cmd.Process.Pid)
	return nil
}

// waitListening polls until the process accepts TCP connections on its
// client and peer ports (it binds them before it loads its data), or it
// exits, or ctx ends.
func (n *EtcdNode) waitListening(ctx context.Context) error {
	for {
		if !n.Running() {
			return fmt.Errorf("etcd member %s exited during start-up\n--- log of %s:\n%s", n.Name, n.Name, logTail(n.LogPath, 0, 15))
		}
		var missing error
		for _, a := range []string{n.Addr(), n.PeerAddr()} {
			// A port nobody listens on refuses at once; the bound is for
			// a listener whose accept queue a loaded machine is slow on.
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				missing = err
				break
			}
			c.Close()
		}
		if missing == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s: not listening on both %s (clients) and %s (peers): %w (%w)", n.Name, n.Addr(), n.PeerAddr(), missing, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (n *EtcdNode) Pause() error  { return n.signal(n.Name, syscall.SIGSTOP) }
func (n *EtcdNode) Resume() error { return n.signal(n.Name, syscall.SIGCONT) }

// Kill ends the process with SIGKILL and waits until it is reaped.
func (n *EtcdNode) Kill() error { return n.kill(n.Name) }

// Stop ends the process: SIGCONT and SIGTERM, then SIGKILL if it has not
// exited within etcdStopGrace (a leader transfers its leadership first). It
// returns once the process is gone.
func (n *EtcdNode) Stop() { n.stop(etcdStopGrace) }

// EtcdCluster is a running etcd system: a cluster.Cluster whose members
// can be paused and killed. It has no clock to move: etcd's leases run on
// monotonic timers.
type EtcdCluster struct {
	nodes    []*EtcdNode
	resource *Server
	dir      string
	spec     cluster.Spec
	routers  []*peerRouter // with a mesh: one per member

	idsMu sync.Mutex
	ids   map[uint64]string // member ID -> name, learnt from Status

	closeOnce sync.Once
	closeErr  error
}

var (
	_ cluster.Cluster = (*EtcdCluster)(nil)
	_ cluster.Pauser  = (*EtcdCluster)(nil)
	_ cluster.Killer  = (*EtcdCluster)(nil)
)

// StartEtcd starts the etcd system of spec (spec.System must be
// cluster.Etcd) and waits until it is healthy (WaitHealthy). With
// spec.Resource it also starts a plain redis-server for the protected
// resource. On error, whatever was started is stopped again; a cancelled
// ctx is reported as Backend.Start says.
func StartEtcd(ctx context.Context, spec cluster.Spec) (*EtcdCluster, error) {
	c, err := startEtcd(ctx, spec)
	if err != nil {
		return nil, startFailed(ctx, err)
	}
	return c, nil
}

func startEtcd(ctx context.Context, spec cluster.Spec) (*EtcdCluster, error) {
	if spec.Descriptor().Server != cluster.ServerEtcd {
		return nil, fmt.Errorf("start etcd: spec is for system %q", spec.System)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	binary, err := FindEtcd()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return nil, err
	}
	spec.Dir = dir
	c := &EtcdCluster{dir: dir, spec: spec, ids: map[uint64]string{}}
	if spec.Resource {
		redisBinary, err := FindRedisServer()
		if err != nil {
			return nil, fmt.Errorf("the resource store: %w", err)
		}
		rdir := nodeDir(spec, "resource")
		c.resource = NewServer(redisBinary, "resource", cluster.RoleResource, Host, 0, rdir, filepath.Join(rdir, "redis.log"), nil)
	}
	fail := func(err error) (*EtcdCluster, error) {
		c.Close(context.Background())
		return nil, err
	}
	initial, release, err := c.planMembers(spec, binary)
	defer release()
	if err != nil {
		return fail(err)
	}
	c.setArgs(initial)
	release()
	if c.resource != nil {
		if err := c.resource.Start(ctx); err != nil {
			return fail(err)
		}
	}
	if err := c.launchMembers(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// planMembers picks every member's ports and, with a mesh, its inbound
// peer link, and returns the initial cluster they name; release frees the
// ports' listeners, which hold them until the members start.
func (c *EtcdCluster) planMembers(spec cluster.Spec, binary string) (initial []string, release func(), err error) {
	// Every port is picked before anything starts: the initial cluster
	// names them all. The picker holds each port's listener open until all
	// are picked, so no two members draw the same port (a CI run once saw
	// a peer port equal to another member's client port). Another process
	// could still take one in between; the member then fails with
	// "address already in use" and its log says so.
	ip := fmt.Sprintf("127.0.0.%d", 2+mrand.Intn(250))
	ports := &portPicker{host: ip}
	for i := 1; i <= spec.Nodes; i++ {
		name := fmt.Sprintf("n%d", i)
		nd := nodeDir(spec, name)
		n := &EtcdNode{Name: name, IP: ip, Dir: nd, DataDir: filepath.Join(nd, "data"), LogPath: filepath.Join(nd, "etcd.log"), binary: binary}
		if n.ClientPort, err = ports.pick(); err != nil {
			return nil, ports.release, fmt.Errorf("start node %s: pick a port: %w", name, err)
		}
		if n.PeerPort, err = ports.pick(); err != nil {
			return nil, ports.release, fmt.Errorf("start node %s: pick a port: %w", name, err)
		}
		n.PeerAnnounce = n.PeerAddr()
		if spec.Mesh != nil {
			r, err := newPeerRouter(name, n.PeerAddr())
			if err != nil {
				return nil, ports.release, err
			}
			c.routers = append(c.routers, r)
			addr, err := spec.Mesh.AddLink("net", name, r.Addr())
			if err != nil {
				return nil, ports.release, fmt.Errorf("start node %s: inbound link: %w", name, err)
			}
			n.PeerAnnounce = addr
		}
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return nil, ports.release, fmt.Errorf("start node %s: %w", name, err)
		}
		initial = append(initial, name+"=http://"+n.PeerAnnounce)
		c.nodes = append(c.nodes, n)
	}
	for i, r := range c.routers {
		links, members := map[string]string{}, map[string]bool{}
		for j, m := range c.nodes {
			members[m.PeerAddr()] = true
			if j != i {
				links[m.PeerAnnounce] = m.PeerAnnounce
			}
		}
		r.start(links, members)
	}
	return initial, ports.release, nil
}

// setArgs gives every member its command line, with a cluster token of
// this start's own, so that members of two runs never join each other.
func (c *EtcdCluster) setArgs(initial []string) {
	token := make([]byte, 6)
	_, _ = rand.Read(token)
	for _, n := range c.nodes {
		n.args = []string{
			"--name", n.Name,
			"--data-dir", n.DataDir,
			"--listen-client-urls", "http://" + n.Addr(),
			"--advertise-client-urls", "http://" + n.Addr(),
			"--listen-peer-urls", "http://" + n.PeerAddr(),
			"--initial-advertise-peer-urls", "http://" + n.PeerAnnounce,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", "lockjepsen-" + hex.EncodeToString(token),
			"--initial-cluster-state", "new",
			"--heartbeat-interval", strconv.FormatInt(EtcdHeartbeat.Milliseconds(), 10),
			"--election-timeout", strconv.FormatInt(EtcdElectionTimeout.Milliseconds(), 10),
			"--logger", "zap",
			"--log-outputs", "stderr",
		}
	}
}

// launchMembers starts the members, records their PIDs, and waits until
// the cluster is healthy.
func (c *EtcdCluster) launchMembers(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start node %s: %w", n.Name, err)
		}
		if err := n.launch(); err != nil {
			return err
		}
	}
	// Recorded before the wait, so that a harness killed while waiting
	// still leaves the PIDs behind for orphan clean-up.
	if err := c.writeProcesses(); err != nil {
		return err
	}
	listenCtx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	for _, n := range c.nodes {
		if err := n.waitListening(listenCtx); err != nil {
			return err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return fmt.Errorf("etcd system: %w\n%s", err, c.logTails())
	}
	// Cancelled after the last check above: still stop, so that a
	// cancelled start never leaves a running cluster behind.
	return cancelled(ctx)
}

func (c *EtcdCluster) logTails() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "--- log of %s (%s):\n%s\n", n.Name, n.LogPath, logTail(n.LogPath, 0, 5))
	}
	return b.String()
}

// Members are the member processes, in node order.
func (c *EtcdCluster) Members() []*EtcdNode { return append([]*EtcdNode(nil), c.nodes...) }

func (c *EtcdCluster) nodeOf(n *EtcdNode) cluster.Node {
	return cluster.Node{Name: n.Name, Role: cluster.RoleNode, Addr: n.Addr(), Announce: n.PeerAnnounce, PID: n.PID(), LogPath: n.LogPath}
}

// Nodes are the members; Addr is the client URL's host:port and Announce
// the peer address the other members use.
func (c *EtcdCluster) Nodes() []cluster.Node { return nodesOf(c.nodes, c.nodeOf) }

// Resource is the protected resource store, or nil.
func (c *EtcdCluster) Resource() *cluster.Node { return resourceNode(c.resource) }

// Close stops every process and waits for each to exit. Then it frees
// the disk space the members preallocated for their write-ahead logs and
// never wrote (TrimEtcdWAL: 64-128 MB a member otherwise, for a log of a
// few MB), so that a run directory keeps its size down to what was
// written; the logs and the data the members wrote stay.
func (c *EtcdCluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, n := range c.nodes {
			wg.Go(n.Stop)
		}
		if c.resource != nil {
			wg.Go(c.resource.Stop)
		}
		wg.Wait()
		for _, r := range c.routers {
			r.close()
		}
		var errs []error
		for _, n := range c.nodes {
			if n.Running() {
				continue // not after Stop; but never under a live member
			}
			if _, err := TrimEtcdWAL(EtcdWALDir(n.DataDir)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
			}
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

func (c *EtcdCluster) writeProcesses() error {
	if c.spec.Processes == nil {
		return nil
	}
	nodes := c.Nodes()
	if r := c.Resource(); r != nil {
		nodes = append(nodes, *r)
	}
	return c.spec.Processes(nodes)
}

func (c *EtcdCluster) member(name string) (*EtcdNode, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

// MemberStatus is one member's view, as its Status call answers.
type MemberStatus struct {
	Name     string
	ID       uint64
	Leader   string // "" when the member knows no leader
	LeaderID uint64
	Term     uint64
	Errors   []string
}

// Status asks one member for its view of the cluster. It does not need a
// quorum, only a member that serves clients.
func (c *EtcdCluster) Status(ctx context.Context, node string) (MemberStatus, error) {
	n, err := c.member(node)
	if err != nil {
		return MemberStatus{}, err
	}
	return c.status(ctx, n)
}

func (c *EtcdCluster) status(ctx context.Context, n *EtcdNode) (MemberStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var r etcdq.Status
	if err := etcdq.Call(ctx, n.Addr(), "/v3/maintenance/status", struct{}{}, &r); err != nil {
		return MemberStatus{}, fmt.Errorf("%s: status: %w", n.Name, err)
	}
	id, leaderID := uint64(r.Header.MemberID), uint64(r.Leader)
	if id == 0 {
		return MemberStatus{}, fmt.Errorf("%s: status: the answer names no member ID", n.Name)
	}
	c.idsMu.Lock()
	c.ids[id] = n.Name
	leader := c.ids[leaderID]
	c.idsMu.Unlock()
	if leaderID != 0 && leader == "" {
		leader = fmt.Sprintf("%x", leaderID)
	}
	return MemberStatus{Name: n.Name, ID: id, Leader: leader, LeaderID: leaderID, Term: uint64(r.RaftTerm), Errors: r.Errors}, nil
}

// Leader asks every member which member leads and returns the answer of a
// majority of them.
func (c *EtcdCluster) Leader(ctx context.Context) (string, error) {
	sts, errs := c.statuses(ctx)
	votes := map[string]int{}
	for _, s := range sts {
		if s.Leader != "" {
			votes[s.Leader]++
		}
	}
	for l, v := range votes {
		if v > len(c.nodes)/2 {
			if _, err := c.member(l); err != nil {
				return "", fmt.Errorf("leader: a majority names %s, which is no member of this cluster", l)
			}
			return l, nil
		}
	}
	return "", fmt.Errorf("leader: no majority of %d members names one (answers %v): %w", len(c.nodes), votes, errors.Join(errs...))
}

// statuses asks every member at once; a member that did not answer has a
// zero MemberStatus and an error.
func (c *EtcdCluster) statuses(ctx context.Context) ([]MemberStatus, []error) {
	sts := make([]MemberStatus, len(c.nodes))
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { sts[i], errs[i] = c.status(ctx, n) })
	}
	wg.Wait()
	return sts, errs
}

// WaitHealthy polls until every member serves clients, reports no alarm,
// names the same leader (one of the members), and answers a linearizable
// read (which needs it to reach the leader and the leader a quorum).
// Without a deadline on ctx it gives up after HealthyTimeout.
func (c *EtcdCluster) WaitHealthy(ctx context.Context) error {
	return sentinelq.Poll(ctx, "a healthy etcd cluster", c.checkHealthy)
}

func (c *EtcdCluster) checkHealthy(ctx context.Context) error {
	sts, errs := c.statuses(ctx)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	members := map[uint64]bool{}
	for _, s := range sts {
		members[s.ID] = true
	}
	for _, s := range sts {
		switch {
		case len(s.Errors) > 0:
			return fmt.Errorf("%s reports %s", s.Name, strings.Join(s.Errors, "; "))
		case s.LeaderID == 0:
			return fmt.Errorf("%s knows no leader", s.Name)
		case !members[s.LeaderID]:
			return fmt.Errorf("%s names leader %s, which is no member of this cluster", s.Name, s.Leader)
		case s.LeaderID != sts[0].LeaderID:
			return fmt.Errorf("members disagree on the leader: %s says %s, %s says %s", sts[0].Name, sts[0].Leader, s.Name, s.Leader)
		}
	}
	rerrs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { rerrs[i] = c.linearizableRead(ctx, n) })
	}
	wg.Wait()
	return errors.Join(rerrs...)
}

// linearizableRead reads a key through one member, linearizably.
func (c *EtcdCluster) linearizableRead(ctx context.Context, n *EtcdNode) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req := etcdq.RangeRequest{Key: []byte("lockjepsen/health")}
	if err := etcdq.Call(ctx, n.Addr(), "/v3/kv/range", req, nil); err != nil {
		return fmt.Errorf("%s: linearizable read: %w", n.Name, err)
	}
	return nil
}

// Pause sends SIGSTOP to a member.
func (c *EtcdCluster) Pause(node string) error { return onNode(c.member, node, (*EtcdNode).Pause) }

// Resume sends SIGCONT to a member.
func (c *EtcdCluster) Resume(node string) error { return onNode(c.member, node, (*EtcdNode).Resume) }

// Kill sends SIGKILL to a member. etcd fsyncs its write-ahead log before it
// acknowledges a write, so there is no unsynced tail to lose: loseUnsynced
// is refused.
func (c *EtcdCluster) Kill(node string, loseUnsynced bool) error {
	return onNode(c.member, node, func(n *EtcdNode) error {
		if loseUnsynced {
			return fmt.Errorf("kill %s: etcd fsyncs its write-ahead log before it acknowledges a write: there are no unsynced writes to lose", node)
		}
		return n.Kill()
	})
}

// Restart starts a killed member again on the same ports and data
// directory. It waits until the member listens, and then, if enough
// members run for a quorum, until it serves clients (etcd serves clients
// only once it has rejoined the cluster); a member restarted while most
// are down cannot, and Restart returns as soon as it listens.
func (c *EtcdCluster) Restart(ctx context.Context, node string) error {
	n, err := c.member(node)
	if err != nil {
		return err
	}
	if err := n.launch(); err != nil {
		return err
	}
	if err := c.writeProcesses(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	if err := n.waitListening(ctx); err != nil {
		return err
	}
	running := 0
	for _, m := range c.nodes {
		if m.Running() {
			running++
		}
	}
	if running <= len(c.nodes)/2 {
		return nil
	}
	var last error
	for {
		if !n.Running() {
			return fmt.Errorf("restart %s: etcd exited\n--- log of %s:\n%s", node, node, logTail(n.LogPath, 0, 15))
		}
		if _, last = c.status(ctx, n); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart %s: it does not serve clients: %w", node, last)
		case <-time.After(pollEvery):
		}
	}
}

// hdrDeliver marks a peer request relayed once: the receiving router
// delivers it to the peer address it names (one of the cluster's members').
const hdrDeliver = "X-Lockjepsen-Deliver"

// peerRouter is the relay in front of one member's peer port (see the
// package comment on the peer network).
type peerRouter struct {
	name     string
	real     string            // the member's peer listener, host:port
	links    map[string]string // peer URL host:port (a member's inbound link) -> that link, for other members
	members  map[string]bool   // every member's real peer address
	ln       net.Listener
	srv      *http.Server
	rp       *httputil.ReverseProxy
	tr       *http.Transport
	serveErr chan error
}

func newPeerRouter(name, real string) (*peerRouter, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
	if err != nil {
		return nil, fmt.Errorf("start node %s: peer router: %w", name, err)
	}
	return &peerRouter{name: name, real: real, ln: ln}, nil
}

func (r *peerRouter) Addr() string { return r.ln.Addr().String() }

// target is where a request goes next, and whether it is relayed back out
// through the dialler's link.
func (r *peerRouter) target(h http.Header) (addr string, relay bool) {
	if d := h.Get(hdrDeliver); d != "" && r.members[d] {
		return d, false
	}
	for _, u := range strings.Split(h.Get("X-PeerURLs"), ",") {
		pu, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			continue
		}
		if link, ok := r.links[pu.Host]; ok {
			return link, true
		}
	}
	return r.real, false
}

func (r *peerRouter) start(links map[string]string, members map[string]bool) {
	r.links, r.members = links, members
	r.tr = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	quiet := log.New(io.Discard, "", 0)
	r.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr, relay := r.target(pr.In.Header)
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", addr, addr
			pr.Out.Header.Del(hdrDeliver)
			if relay {
				pr.Out.Header.Set(hdrDeliver, r.real)
			}
		},
		Transport:     r.tr,
		FlushInterval: -1, // raft streams: every message at once
		ErrorLog:      quiet,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	r.srv = &http.Server{Handler: r.rp, ErrorLog: quiet, ReadHeaderTimeout: 5 * time.Second}
	r.serveErr = make(chan error, 1)
	go func() { r.serveErr <- r.srv.Serve(r.ln) }()
}

func (r *peerRouter) close() {
	if r.srv == nil {
		r.ln.Close()
		return
	}
	r.srv.Close()
	<-r.serveErr
	r.tr.CloseIdleConnections()
}
