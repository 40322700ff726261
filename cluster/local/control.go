package local

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/internal/ctxsleep"
)

// The local cluster pauses, kills and moves the clocks of its processes.
var (
	_ cluster.Pauser      = (*Cluster)(nil)
	_ cluster.Killer      = (*Cluster)(nil)
	_ cluster.ClockSetter = (*Cluster)(nil)
)

// server finds a node or a sentinel by name.
func (c *Cluster) server(node string) (*Server, error) {
	for _, list := range [][]*Server{c.servers, c.sentinels} {
		for _, s := range list {
			if s.Name == node {
				return s, nil
			}
		}
	}
	return nil, fmt.Errorf("no node %q", node)
}

// onNode finds a process by name (with a cluster's lookup, whose error
// names the missing node) and acts on it: the nemesis operations of both
// local systems.
func onNode[P any](find func(string) (P, error), node string, act func(P) error) error {
	p, err := find(node)
	if err != nil {
		return err
	}
	return act(p)
}

// Pause sends SIGSTOP to a node.
func (c *Cluster) Pause(node string) error { return onNode(c.server, node, (*Server).Pause) }

// Resume sends SIGCONT to a node.
func (c *Cluster) Resume(node string) error { return onNode(c.server, node, (*Server).Resume) }

// Kill sends SIGKILL to a node and, with loseUnsynced, cuts the last
// second of its append-only file.
func (c *Cluster) Kill(node string, loseUnsynced bool) error {
	s, err := c.server(node)
	if err != nil {
		return err
	}
	if loseUnsynced && s.Sentinel {
		return fmt.Errorf("kill %s: a sentinel has no append-only file to lose writes from", node)
	}
	// The crash is now: what was written in the second before it is the
	// unsynced tail, however long the process then takes to be reaped.
	crash := time.Now()
	if err := s.Kill(); err != nil {
		return err
	}
	if loseUnsynced {
		if c.aof == nil {
			return fmt.Errorf("kill %s: losing unsynced writes needs persistence everysec or always", node)
		}
		if err := c.aof.truncate(s, crash.Add(-time.Second)); err != nil {
			return fmt.Errorf("kill %s: %w", node, err)
		}
	}
	return nil
}

// Restart starts a killed node again on the same port and data.
func (c *Cluster) Restart(ctx context.Context, node string) error {
	s, err := c.server(node)
	if err != nil {
		return err
	}
	if err := s.Restart(ctx); err != nil {
		return err
	}
	// The PID changed: keep the record that orphan clean-up relies on true.
	return c.writeProcesses()
}

// SetClock moves a node's wall clock to real time + offset.
func (c *Cluster) SetClock(node string, offset time.Duration) error {
	s, err := c.server(node)
	if err != nil {
		return err
	}
	if !c.fakeClock {
		return fmt.Errorf("set clock of %s: the cluster was started without a fake clock", node)
	}
	return fakeclock.Set(clockFile(s), offset, 1)
}

func clockFile(s *Server) string { return filepath.Join(s.Dir, "faketime") }

// aofSampler remembers the size of each node's current incremental AOF
// file over the last seconds, so that a kill can drop what was written
// since a chosen moment: the un-fsynced tail a real crash would lose (the
// page cache of this machine survives a SIGKILL, so nothing is lost
// otherwise).
type aofSampler struct {
	mu      sync.Mutex
	samples map[string][]aofSample // node -> samples, oldest first
	stop    chan struct{}
	done    chan struct{}
}

type aofSample struct {
	at   time.Time
	path string
	size int64
}

const aofSampleEvery = 50 * time.Millisecond

func startAOFSampler(servers []*Server) *aofSampler {
	a := &aofSampler{samples: map[string][]aofSample{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		ctxsleep.Every(a.stop, aofSampleEvery, func() { a.sample(servers) })
	}()
	return a
}

// sample notes the size of each running server's append-only file.
func (a *aofSampler) sample(servers []*Server) {
	for _, s := range servers {
		if !s.Running() {
			continue // keep the samples from before a kill
		}
		path, err := currentIncrAOF(s.Dir)
		if err != nil {
			continue
		}
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		// Stamped after the Stat, not with the tick's time: a starved
		// goroutine can stat long after its tick, and a size stamped
		// earlier than it was read would keep writes made after the
		// stamp.
		a.add(s.Name, aofSample{time.Now(), path, st.Size()})
	}
}

func (a *aofSampler) add(node string, smp aofSample) {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := append(a.samples[node], smp)
	// Keep 3 s of samples.
	for len(list) > 0 && smp.at.Sub(list[0].at) > 3*time.Second {
		list = list[1:]
	}
	a.samples[node] = list
}

// truncate cuts the node's current incremental AOF back to its size at
// `since` (the last sample before it).
func (a *aofSampler) truncate(s *Server, since time.Time) error {
	a.mu.Lock()
	var keep *aofSample
	for i := range a.samples[s.Name] {
		if smp := a.samples[s.Name][i]; !smp.at.After(since) {
			keep = &smp
		}
	}
	a.mu.Unlock()
	if keep == nil {
		return nil // the node is younger than a second: nothing was synced yet, keep what is there
	}
	st, err := os.Stat(keep.path)
	if err != nil {
		return fmt.Errorf("lose unsynced writes: %w", err)
	}
	if st.Size() <= keep.size {
		return nil
	}
	if err := os.Truncate(keep.path, keep.size); err != nil {
		return fmt.Errorf("lose unsynced writes: %w", err)
	}
	return nil
}

func (a *aofSampler) close() {
	close(a.stop)
	<-a.done
}

// currentIncrAOF reads Redis 7's AOF manifest for the incremental file
// being appended to.
func currentIncrAOF(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "appendonlydir")
	manifests, err := filepath.Glob(filepath.Join(dir, "*.manifest"))
	if err != nil || len(manifests) == 0 {
		return "", fmt.Errorf("no AOF manifest in %s", dir)
	}
	f, err := os.Open(manifests[0])
	if err != nil {
		return "", err
	}
	defer f.Close()
	var incr string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// file appendonly.aof.1.incr.aof seq 1 type i
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[0] == "file" && fields[len(fields)-1] == "i" {
			incr = fields[1]
		}
	}
	if incr == "" {
		return "", fmt.Errorf("no incremental AOF in %s", manifests[0])
	}
	return filepath.Join(dir, incr), nil
}
