package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local/fakeclock"
)

// Host is the loopback address nodes bind to.
const Host = "127.0.0.1"

// Backend starts clusters as local processes.
type Backend struct{}

// Name is "local".
func (Backend) Name() string { return "local" }

// Cluster is a running local topology.
type Cluster struct {
	servers   []*Server
	resource  *Server
	dir       string
	fakeClock bool
	aof       *aofSampler // nil without persistence

	closeOnce sync.Once
}

// Start launches the topology of spec and waits until every node is ready.
// On error, whatever was started is stopped again.
func (Backend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	binary, err := FindRedisServer()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: spec.Dir, fakeClock: spec.FakeClock}
	var kit *fakeclock.Kit
	if spec.FakeClock {
		if kit, err = prepareFakeClock(ctx); err != nil {
			return nil, err
		}
	}
	newServer := func(name, role string) *Server {
		dir := nodeDir(spec, name)
		return &Server{
			Name: name, Role: role, Host: Host, Dir: dir,
			LogPath: filepath.Join(dir, "redis.log"),
			Args:    persistenceArgs(spec.Persistence), binary: binary,
		}
	}
	for i := 1; i <= spec.Nodes; i++ {
		s := newServer(fmt.Sprintf("n%d", i), cluster.RoleNode)
		if kit != nil {
			if err := os.MkdirAll(s.Dir, 0o755); err != nil {
				return nil, fmt.Errorf("start node %s: %w", s.Name, err)
			}
			if err := fakeclock.Set(clockFile(s), 0, 1); err != nil {
				return nil, fmt.Errorf("start node %s: %w", s.Name, err)
			}
			s.Env = kit.Env(clockFile(s))
			s.AfterExit = func(pid int) { fakeclock.CleanupShm(pid) }
		}
		c.servers = append(c.servers, s)
	}
	if spec.Resource {
		c.resource = newServer("resource", cluster.RoleResource)
		c.resource.Args = nil // the resource is not under test; keep it plain
	}
	for _, s := range c.all() {
		if err := s.Start(ctx); err != nil {
			c.Close(context.Background())
			return nil, err
		}
	}
	if err := c.writeProcesses(); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	if spec.Persistence != cluster.PersistNone {
		c.aof = startAOFSampler(c.servers)
	}
	return c, nil
}

// prepareFakeClock builds (or finds in the user's cache) what a node needs
// to run with a movable clock.
func prepareFakeClock(ctx context.Context) (*fakeclock.Kit, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	kit, err := fakeclock.Prepare(ctx, filepath.Join(cache, "lockjepsen"))
	if err != nil {
		return nil, fmt.Errorf("clock faults: %w", err)
	}
	return kit, nil
}

func persistenceArgs(mode string) []string {
	switch mode {
	case cluster.PersistEverysec, cluster.PersistAlways:
		return []string{"--appendonly", "yes", "--appendfsync", mode}
	}
	return nil
}

func (c *Cluster) all() []*Server {
	if c.resource == nil {
		return c.servers
	}
	return append(append([]*Server{}, c.servers...), c.resource)
}

func nodeOf(s *Server) cluster.Node {
	return cluster.Node{Name: s.Name, Role: s.Role, Addr: s.Addr(), PID: s.PID(), LogPath: s.LogPath}
}

// Nodes are the nodes under test.
func (c *Cluster) Nodes() []cluster.Node {
	out := make([]cluster.Node, len(c.servers))
	for i, s := range c.servers {
		out[i] = nodeOf(s)
	}
	return out
}

// Resource is the protected resource store, or nil.
func (c *Cluster) Resource() *cluster.Node {
	if c.resource == nil {
		return nil
	}
	n := nodeOf(c.resource)
	return &n
}

// Close stops every process. It waits for each to exit.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		if c.aof != nil {
			c.aof.close()
		}
		var wg sync.WaitGroup
		for _, s := range c.all() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.Stop()
			}()
		}
		wg.Wait()
	})
	return nil
}

// writeProcesses records the PIDs in the store so that a later run can find
// servers orphaned by a harness that was killed.
func (c *Cluster) writeProcesses() error {
	var nodes []cluster.Node
	for _, s := range c.all() {
		nodes = append(nodes, nodeOf(s))
	}
	b, err := json.MarshalIndent(nodes, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "nodes.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("record node processes: %w", err)
	}
	return nil
}
