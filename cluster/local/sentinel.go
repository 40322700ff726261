package local

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// The sentinel system: n1 starts as primary, n2..nN as its replicas, and
// s1..sK redis-sentinel processes monitor it. The local cluster is a
// cluster.SentinelCluster.

const (
	// HealthyTimeout bounds WaitHealthy (and so Start) when the caller's
	// context has no deadline of its own.
	HealthyTimeout = 30 * time.Second
	// adminTimeout bounds each command the backend itself sends. A paused
	// or cut-off process must cost a poll, not the whole wait.
	adminTimeout = 500 * time.Millisecond
	pollEvery    = 50 * time.Millisecond
)

// setupSentinel describes the sentinel processes and fixes every address
// before anything starts: replicas and sentinels must be told the
// primary's address, and each process its own announced address, in their
// configuration.
func (c *Cluster) setupSentinel(spec cluster.Spec, sentinelBinary string, withClock func(*Server) error) error {
	for i := 1; i <= spec.Sentinels; i++ {
		name := fmt.Sprintf("s%d", i)
		dir := nodeDir(spec, name)
		s := &Server{
			Name: name, Role: cluster.RoleSentinel, Host: Host, Dir: dir,
			LogPath:    filepath.Join(dir, "sentinel.log"),
			ConfigFile: filepath.Join(dir, "sentinel.conf"),
			Sentinel:   true, binary: sentinelBinary,
		}
		if err := withClock(s); err != nil {
			return err
		}
		c.sentinels = append(c.sentinels, s)
	}
	// Ports are picked now, not at start, because configurations name
	// them. Another process could take one in between; Start then fails
	// with "address in use" and says which node. The processes listen on
	// a loopback address of this cluster's own, not 127.0.0.1, where the
	// local end of any outgoing connection can take a port picked free
	// before the process binds it.
	ip := fmt.Sprintf("127.0.0.%d", 2+mrand.Intn(250))
	for _, s := range append(append([]*Server{}, c.servers...), c.sentinels...) {
		s.Host = ip
		port, err := freePort(s.Host)
		if err != nil {
			return fmt.Errorf("start node %s: pick a port: %w", s.Name, err)
		}
		s.Port = port
		if spec.Mesh != nil {
			addr, err := spec.Mesh.AddLink("net", s.Name, s.Addr())
			if err != nil {
				return fmt.Errorf("start node %s: inbound link: %w", s.Name, err)
			}
			s.Announce = addr
		}
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return fmt.Errorf("start node %s: %w", s.Name, err)
		}
	}

	primary := c.servers[0]
	for i, s := range c.servers {
		host, port := splitAddr(s.AnnounceAddr())
		s.Args = append(s.Args,
			// The primary lists its replicas by these, and sentinels
			// reach replicas only through what the primary lists.
			"--replica-announce-ip", host,
			"--replica-announce-port", port,
			// Diskless sync waits 5 s by default for more replicas to
			// join; a rejoining node should not.
			"--repl-diskless-sync-delay", "0",
		)
		if spec.MinReplicasToWrite > 0 {
			s.Args = append(s.Args, "--min-replicas-to-write", strconv.Itoa(spec.MinReplicasToWrite))
			if spec.MinReplicasMaxLag > 0 {
				s.Args = append(s.Args, "--min-replicas-max-lag", strconv.Itoa(int(spec.MinReplicasMaxLag/time.Second)))
			}
		}
		// replicaof lives in the file only: Sentinel rewrites it there
		// after a failover, and a command-line replicaof would override
		// the rewrite when the node restarts.
		s.ConfigFile = filepath.Join(s.Dir, "redis.conf")
		conf := "# Written by lockjepsen; rewritten by Sentinel (CONFIG REWRITE) after failovers.\n"
		if i > 0 {
			ph, pp := splitAddr(primary.AnnounceAddr())
			conf += fmt.Sprintf("replicaof %s %s\n", ph, pp)
		}
		if err := os.WriteFile(s.ConfigFile, []byte(conf), 0o644); err != nil {
			return fmt.Errorf("start node %s: write config: %w", s.Name, err)
		}
	}

	ph, pp := splitAddr(primary.AnnounceAddr())
	m := cluster.MasterName
	for _, s := range c.sentinels {
		host, port := splitAddr(s.AnnounceAddr())
		conf := strings.Join([]string{
			"# Written by lockjepsen; Sentinel rewrites this file with what it learns.",
			fmt.Sprintf("sentinel monitor %s %s %s %d", m, ph, pp, spec.Sentinels/2+1),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", m, spec.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", m, spec.FailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", m),
			// Other sentinels connect to what a sentinel announces in
			// its hello messages: its inbound link.
			"sentinel announce-ip " + host,
			"sentinel announce-port " + port,
		}, "\n") + "\n"
		if err := os.WriteFile(s.ConfigFile, []byte(conf), 0o644); err != nil {
			return fmt.Errorf("start sentinel %s: write config: %w", s.Name, err)
		}
	}
	return nil
}

// startSentinel starts the nodes, then the sentinels, calls started, and
// waits until the whole topology is healthy.
func (c *Cluster) startSentinel(ctx context.Context, started func() error) error {
	for _, s := range c.servers {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	// A sentinel learns the replicas from the primary's INFO, which it
	// asks for at once on connecting and then only every 10 s: start the
	// sentinels once the primary lists every replica, so they know them
	// from the start.
	if err := c.poll(ctx, "replicas connected to the primary", func(ctx context.Context) error {
		return c.checkReplication(ctx, c.servers[0])
	}); err != nil {
		return err
	}
	for _, s := range c.sentinels {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	if err := started(); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

func splitAddr(addr string) (host, port string) {
	host, port, _ = net.SplitHostPort(addr)
	return host, port
}

// MasterName is the name the sentinels monitor the primary under.
func (c *Cluster) MasterName() string { return cluster.MasterName }

// Sentinels are the sentinel processes (none for other systems).
func (c *Cluster) Sentinels() []cluster.Node {
	out := make([]cluster.Node, len(c.sentinels))
	for i, s := range c.sentinels {
		out[i] = nodeOf(s)
	}
	return out
}

// admin returns the backend's own client for a process, on its real
// address: the backend's checks must see the processes, not the faults
// on their links.
func (c *Cluster) admin(s *Server) *redis.Client {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if cl, ok := c.admins[s.Name]; ok {
		return cl
	}
	if c.admins == nil {
		c.admins = map[string]*redis.Client{}
	}
	cl := redis.NewClient(&redis.Options{
		Addr: s.Addr(), MaxRetries: -1, DisableIdentity: true,
		DialTimeout: adminTimeout, ReadTimeout: adminTimeout, WriteTimeout: adminTimeout,
		PoolSize: 2,
		// Sentinel replies are read as flat RESP2 field/value lists.
		Protocol: 2,
	})
	c.admins[s.Name] = cl
	return cl
}

func (c *Cluster) closeAdmins() {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	for _, cl := range c.admins {
		cl.Close()
	}
	c.admins = nil
}

func (c *Cluster) do(ctx context.Context, s *Server, args ...any) *redis.Cmd {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	return c.admin(s).Do(ctx, args...)
}

// byAnnounce maps an address the cluster reports to its node.
func (c *Cluster) byAnnounce(addr string) (*Server, bool) {
	for _, s := range c.servers {
		if s.AnnounceAddr() == addr {
			return s, true
		}
	}
	return nil, false
}

// masterAddrs asks every sentinel for the primary's address, concurrently.
// A sentinel that does not answer has an error in its place.
func (c *Cluster) masterAddrs(ctx context.Context) ([]string, []error) {
	addrs := make([]string, len(c.sentinels))
	errs := make([]error, len(c.sentinels))
	var wg sync.WaitGroup
	for i, s := range c.sentinels {
		wg.Go(func() {
			hp, err := c.do(ctx, s, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", cluster.MasterName).StringSlice()
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("sentinel %s: %w", s.Name, err)
			case len(hp) != 2:
				errs[i] = fmt.Errorf("sentinel %s: master address %q", s.Name, hp)
			default:
				addrs[i] = net.JoinHostPort(hp[0], hp[1])
			}
		})
	}
	wg.Wait()
	return addrs, errs
}

// Primary asks the sentinels which node is the primary now and returns the
// answer of a majority of them.
func (c *Cluster) Primary(ctx context.Context) (string, error) {
	if len(c.sentinels) == 0 {
		return "", errors.New("primary: the cluster has no sentinels")
	}
	addrs, errs := c.masterAddrs(ctx)
	votes := map[string]int{}
	for _, a := range addrs {
		if a != "" {
			votes[a]++
		}
	}
	for a, n := range votes {
		if n > len(c.sentinels)/2 {
			s, ok := c.byAnnounce(a)
			if !ok {
				return "", fmt.Errorf("primary: the sentinels name %s, which is no node of this cluster", a)
			}
			return s.Name, nil
		}
	}
	return "", fmt.Errorf("primary: no majority of %d sentinels agrees (answers %v): %w", len(c.sentinels), votes, errors.Join(errs...))
}

// WaitHealthy polls until every sentinel names the same primary, every
// other node replicates from it and has caught up with it, and every
// sentinel sees every replica and every other sentinel as healthy. Without
// a deadline on ctx it gives up after HealthyTimeout.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	if len(c.sentinels) == 0 {
		return errors.New("wait healthy: the cluster has no sentinels")
	}
	return c.poll(ctx, "healthy sentinel topology", c.checkHealthy)
}

// poll runs check until it succeeds, ctx ends, or HealthyTimeout passes if
// ctx has no deadline. The error says what was still wrong.
func (c *Cluster) poll(ctx context.Context, what string, check func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, HealthyTimeout)
		defer cancel()
	}
	start := time.Now()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: not reached after %v: %w", what, time.Since(start).Round(time.Millisecond), err)
		case <-t.C:
		}
	}
}

func (c *Cluster) checkHealthy(ctx context.Context) error {
	addrs, errs := c.masterAddrs(ctx)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, a := range addrs {
		if a != addrs[0] {
			return fmt.Errorf("sentinels disagree on the primary: %s says %s, %s says %s",
				c.sentinels[0].Name, addrs[0], c.sentinels[i].Name, a)
		}
	}
	primary, ok := c.byAnnounce(addrs[0])
	if !ok {
		return fmt.Errorf("the sentinels name %s as primary, which is no node of this cluster", addrs[0])
	}
	if err := c.checkReplication(ctx, primary); err != nil {
		return err
	}
	for _, s := range c.sentinels {
		if err := c.checkSentinel(ctx, s, primary); err != nil {
			return err
		}
	}
	return nil
}

// checkReplication checks that primary is a primary that lists every other
// node as an online replica, and that each of them replicates from it,
// with its link up and its offset at least the primary's.
func (c *Cluster) checkReplication(ctx context.Context, primary *Server) error {
	pinfo, err := c.replicationInfo(ctx, primary)
	if err != nil {
		return err
	}
	if pinfo["role"] != "master" {
		return fmt.Errorf("%s: role %s, want master", primary.Name, pinfo["role"])
	}
	online := map[string]bool{}
	for k, v := range pinfo {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0
		if !strings.HasPrefix(k, "slave") || !strings.Contains(v, "state=") {
			continue
		}
		f := fields(v, ",")
		if f["state"] == "online" {
			online[net.JoinHostPort(f["ip"], f["port"])] = true
		}
	}
	poff, _ := strconv.ParseInt(pinfo["master_repl_offset"], 10, 64)
	for _, r := range c.servers {
		if r == primary {
			continue
		}
		if !online[r.AnnounceAddr()] {
			return fmt.Errorf("%s does not list %s (%s) as an online replica", primary.Name, r.Name, r.AnnounceAddr())
		}
		rinfo, err := c.replicationInfo(ctx, r)
		if err != nil {
			return err
		}
		master := net.JoinHostPort(rinfo["master_host"], rinfo["master_port"])
		switch {
		case rinfo["role"] != "slave":
			return fmt.Errorf("%s: role %s, want replica of %s", r.Name, rinfo["role"], primary.Name)
		case master != primary.AnnounceAddr():
			return fmt.Errorf("%s replicates from %s, not from %s (%s)", r.Name, master, primary.Name, primary.AnnounceAddr())
		case rinfo["master_link_status"] != "up" || rinfo["master_sync_in_progress"] != "0":
			return fmt.Errorf("%s: link to %s %s, sync in progress %s", r.Name, primary.Name, rinfo["master_link_status"], rinfo["master_sync_in_progress"])
		}
		// The primary's offset was read first: a replica that has reached
		// it is in sync as of then, even while writes go on.
		if roff, _ := strconv.ParseInt(rinfo["slave_repl_offset"], 10, 64); roff < poff {
			return fmt.Errorf("%s is behind %s: offset %d < %d", r.Name, primary.Name, roff, poff)
		}
	}
	return nil
}

// checkSentinel checks that a sentinel sees primary as a healthy primary,
// every other node as a healthy replica of it, and every other sentinel.
func (c *Cluster) checkSentinel(ctx context.Context, s *Server, primary *Server) error {
	m := cluster.MasterName
	v, err := c.do(ctx, s, "SENTINEL", "MASTER", m).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: master: %w", s.Name, err)
	}
	master := pairs(v)
	if master["flags"] != "master" {
		return fmt.Errorf("sentinel %s: primary %s has flags %s", s.Name, primary.Name, master["flags"])
	}
	v, err = c.do(ctx, s, "SENTINEL", "REPLICAS", m).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: replicas: %w", s.Name, err)
	}
	replicas := map[string]map[string]string{}
	for _, r := range list(v) {
		p := pairs(r)
		replicas[net.JoinHostPort(p["ip"], p["port"])] = p
	}
	for _, r := range c.servers {
		if r == primary {
			continue
		}
		p, ok := replicas[r.AnnounceAddr()]
		switch {
		case !ok:
			return fmt.Errorf("sentinel %s does not know replica %s (%s)", s.Name, r.Name, r.AnnounceAddr())
		case p["flags"] != "slave":
			return fmt.Errorf("sentinel %s: replica %s has flags %s", s.Name, r.Name, p["flags"])
		}
		// Not checked: the sentinel's master-host for the replica. A
		// sentinel asks a replica for INFO only every 10 s, so for a
		// demoted primary it says "?" for up to 10 s after the node itself
		// follows the new primary; checkReplication asked the node.
	}
	v, err = c.do(ctx, s, "SENTINEL", "SENTINELS", m).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: sentinels: %w", s.Name, err)
	}
	peers := map[string]map[string]string{}
	for _, o := range list(v) {
		p := pairs(o)
		peers[net.JoinHostPort(p["ip"], p["port"])] = p
	}
	for _, o := range c.sentinels {
		if o == s {
			continue
		}
		p, ok := peers[o.AnnounceAddr()]
		switch {
		case !ok:
			return fmt.Errorf("sentinel %s does not know sentinel %s (%s)", s.Name, o.Name, o.AnnounceAddr())
		case p["flags"] != "sentinel":
			return fmt.Errorf("sentinel %s: sentinel %s has flags %s", s.Name, o.Name, p["flags"])
		}
	}
	return nil
}

// Failover asks a sentinel for a manual failover and waits until a
// majority of the sentinels names another primary. Without a deadline on
// ctx it gives up after HealthyTimeout.
func (c *Cluster) Failover(ctx context.Context) (string, error) {
	if len(c.sentinels) == 0 {
		return "", errors.New("failover: the cluster has no sentinels")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, HealthyTimeout)
		defer cancel()
	}
	old, err := c.Primary(ctx)
	if err != nil {
		return "", fmt.Errorf("failover: %w", err)
	}
	// A sentinel refuses while a failover is in progress (INPROG) or
	// while it knows no replica fit to promote (NOGOODSLAVE); either can
	// pass, so ask the sentinels in turn until one accepts.
	var errs []error
	for i := 0; ; i++ {
		s := c.sentinels[i%len(c.sentinels)]
		err := c.do(ctx, s, "SENTINEL", "FAILOVER", cluster.MasterName).Err()
		if err == nil {
			break
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %w", s.Name, err))
		if len(errs) > len(c.sentinels) {
			errs = errs[1:]
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("failover away from %s: no sentinel accepted: %w", old, errors.Join(errs...))
		case <-time.After(pollEvery):
		}
	}
	var now string
	err = c.poll(ctx, "a new primary", func(ctx context.Context) error {
		p, err := c.Primary(ctx)
		if err != nil {
			return err
		}
		if p == old {
			return fmt.Errorf("the sentinels still name %s", old)
		}
		now = p
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("failover away from %s: %w", old, err)
	}
	return now, nil
}

// replicationInfo is a node's INFO replication as a map.
func (c *Cluster) replicationInfo(ctx context.Context, s *Server) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	txt, err := c.admin(s).Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("%s: info replication: %w", s.Name, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(txt, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// fields parses "a=1,b=2".
func fields(s, sep string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, sep) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// pairs reads a Sentinel reply of alternating field names and values.
func pairs(v any) map[string]string {
	out := map[string]string{}
	l := list(v)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		val, _ := l[i+1].(string)
		out[k] = val
	}
	return out
}
