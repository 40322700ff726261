package local

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand"
	"net"
	"os"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// The sentinel system: n1 starts as primary, n2..nN as its replicas, and
// s1..sK redis-sentinel processes monitor it. The local cluster is a
// cluster.SentinelCluster.

// The backend-independent queries (primary by majority, health checks,
// manual failover) are package sentinelq's; this file describes the local
// processes to it.

const (
	// HealthyTimeout bounds Failover (and the etcd system's WaitHealthy)
	// when the caller's context has no deadline of its own.
	HealthyTimeout = sentinelq.HealthyTimeout
	// WaitHealthyTimeout bounds WaitHealthy (and so Start) when the
	// caller's context has no deadline of its own: it waits out TILT too.
	WaitHealthyTimeout = sentinelq.WaitHealthyTimeout
	// adminTimeout bounds each command the backend itself sends. A paused
	// or cut-off process must cost a poll, not the whole wait.
	adminTimeout = sentinelq.AdminTimeout
	pollEvery    = sentinelq.PollEvery
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
	// them. The picker holds each one until startSentinel, so that no two
	// processes of this cluster draw the same port (a CI run's sentinel
	// drew a node's port and waited two minutes on a redis-server that
	// knew no SENTINEL command). Another process could still take one
	// after the release; Start then fails with "address in use" and says
	// which node. The processes listen on a loopback address of this
	// cluster's own, not 127.0.0.1, where the local end of any outgoing
	// connection can take a port picked free before the process binds it.
	ip := fmt.Sprintf("127.0.0.%d", 2+mrand.Intn(250))
	c.heldPorts = &portPicker{host: ip}
	for _, s := range append(append([]*Server{}, c.servers...), c.sentinels...) {
		s.Host = ip
		port, err := c.heldPorts.pick()
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
		s.Args = append(s.Args, spec.MinReplicasArgs()...)
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
	for _, s := range c.sentinels {
		host, port := splitAddr(s.AnnounceAddr())
		conf := cluster.SentinelConf(spec, ph, pp, host, port)
		if err := os.WriteFile(s.ConfigFile, []byte(conf), 0o644); err != nil {
			return fmt.Errorf("start sentinel %s: write config: %w", s.Name, err)
		}
	}
	return nil
}

// startSentinel starts the nodes, then the sentinels, calls started, and
// waits until the whole topology is healthy.
func (c *Cluster) startSentinel(ctx context.Context, started func() error) error {
	c.heldPorts.release()
	for _, s := range c.servers {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	// A sentinel learns the replicas from the primary's INFO, which it
	// asks for at once on connecting and then only every 10 s: start the
	// sentinels once the primary lists every replica, so they know them
	// from the start.
	if err := sentinelq.Poll(ctx, "replicas connected to the primary", func(ctx context.Context) error {
		return c.deployment().CheckReplication(ctx, c.servers[0].Name)
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
func (c *Cluster) Sentinels() []cluster.Node { return nodesOf(c.sentinels, nodeOf) }

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
	cl := redis.NewClient(sentinelq.AdminOptions(s.Addr()))
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

// deployment describes the sentinel system to the shared queries: every
// process by its announced address, with the backend's own client on its
// real one. Nil for other systems.
func (c *Cluster) deployment() *sentinelq.Deployment {
	if len(c.sentinels) == 0 {
		return nil
	}
	proc := func(s *Server) sentinelq.Proc {
		return sentinelq.Proc{Name: s.Name, Announce: s.AnnounceAddr(), Client: c.admin(s)}
	}
	d := &sentinelq.Deployment{MasterName: cluster.MasterName, FailoverTimeout: c.spec.FailoverTimeout}
	for _, s := range c.servers {
		d.Nodes = append(d.Nodes, proc(s))
	}
	for _, s := range c.sentinels {
		d.Sentinels = append(d.Sentinels, proc(s))
	}
	return d
}

// Primary asks the sentinels which node is the primary now and returns the
// answer of a majority of them.
func (c *Cluster) Primary(ctx context.Context) (string, error) {
	d := c.deployment()
	if d == nil {
		return "", errors.New("primary: the cluster has no sentinels")
	}
	return d.Primary(ctx)
}

// WaitHealthy polls until every sentinel names the same primary and is out
// of TILT mode, every other node replicates from it and has caught up with
// it, and every sentinel sees every replica and every other sentinel as
// healthy. Without a deadline on ctx it gives up after WaitHealthyTimeout.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	if c.slots != nil {
		return c.slots.WaitHealthy(ctx)
	}
	d := c.deployment()
	if d == nil {
		return errors.New("wait healthy: the cluster has no sentinels")
	}
	return d.WaitHealthy(ctx)
}

// Failover asks a sentinel for a manual failover and waits until a
// majority of the sentinels names another primary. Without a deadline on
// ctx it gives up after HealthyTimeout.
func (c *Cluster) Failover(ctx context.Context) (string, error) {
	d := c.deployment()
	if d == nil {
		return "", errors.New("failover: the cluster has no sentinels")
	}
	return d.Failover(ctx)
}
