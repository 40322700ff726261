package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
)

// ReadyTimeout bounds the wait for a started server to answer PING from
// the control machine. It is a failure deadline, not an expectation.
const ReadyTimeout = 60 * time.Second

// Backend runs systems on the hosts of a hosts file over SSH.
type Backend struct {
	Hosts  *Hosts
	Runner *Runner
}

// New returns the backend of a hosts file.
func New(h *Hosts, r *Runner) Backend { return Backend{Hosts: h, Runner: r} }

var _ cluster.Fitter = Backend{}

// Fit says whether the hosts file has the processes a spec needs, and
// then whether its key and known_hosts files are there to dial them
// (Hosts.CheckFiles; not for a dry run, which dials nothing), before
// anything starts.
func (b Backend) Fit(spec cluster.Spec) error {
	if err := b.Hosts.Fit(spec); err != nil {
		return err
	}
	if b.Runner == nil || b.Runner.Dry() {
		return nil
	}
	return b.Hosts.CheckFiles(b.Runner.trust)
}

// Name is "ssh".
func (Backend) Name() string { return "ssh" }

var _ cluster.OrphanReaper = Backend{}

// ReapOrphans executes the marker file each process's directory holds
// when a run was killed: it undoes that run's faults and stops its
// servers. One line per command it ran.
func (b Backend) ReapOrphans(ctx context.Context) []string {
	var out []string
	for _, p := range b.Hosts.Nodes {
		got, err := b.Runner.Run(ctx, p, healMarkerCmd(p.Dir))
		if err != nil {
			out = append(out, fmt.Sprintf("ssh: could not heal what an earlier run left on %s (%s): %v", p.Name, p.SSH, err))
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			if l != "" {
				out = append(out, fmt.Sprintf("ssh: healed on %s what a killed run left: %s", p.Name, l))
			}
		}
	}
	return out
}

// Cluster is a system running on the hosts.
type Cluster struct {
	b         Backend
	spec      cluster.Spec
	nodes     []*proc
	sentinels []*proc
	// resource holds the protected resource (nil unless the spec asks):
	// not under test, so in no fault's reach and no node's peers.
	resource *proc
	dep      *sentinelq.Deployment
	admins   []*redis.Client

	mu        sync.Mutex // the procs' fault state and markers
	closeOnce sync.Once
	closeErr  error
}

var (
	_ cluster.Pauser          = (*Cluster)(nil)
	_ cluster.Killer          = (*Cluster)(nil)
	_ cluster.ClockSetter     = (*Cluster)(nil)
	_ cluster.SentinelCluster = (*Cluster)(nil)
)

// Start heals what an earlier killed run left, writes each process's
// configuration, starts the servers (redis nodes first, then sentinels)
// and waits until each answers from the control machine; the sentinel
// system also until it is healthy. On error or cancellation everything
// started is stopped again.
func (b Backend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.WithDefaults()
	if err := b.Hosts.Fit(spec); err != nil {
		return nil, err
	}
	c := &Cluster{b: b, spec: spec}
	for i, p := range b.Hosts.ByRole(RoleRedis) {
		role := spec.Descriptor().NodeRole(i+1, spec.Nodes)
		c.nodes = append(c.nodes, &proc{Process: p, role: role})
	}
	for _, p := range b.Hosts.ByRole(RoleSentinel) {
		c.sentinels = append(c.sentinels, &proc{Process: p, role: cluster.RoleSentinel})
	}
	if r := b.Hosts.ByRole(RoleResource); spec.Resource && len(r) == 1 {
		c.resource = &proc{Process: r[0], role: cluster.RoleResource}
	}
	if spec.FakeClock {
		for _, n := range c.nodes {
			n.env = fmt.Sprintf("LD_PRELOAD=%s FAKETIME_TIMESTAMP_FILE=%s FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1", n.Faketime, n.file(clockFile))
		}
	}
	b.ReapOrphans(ctx)
	if err := c.start(ctx); err != nil {
		if cerr := c.Close(context.WithoutCancel(ctx)); cerr != nil {
			err = fmt.Errorf("%w\n(stopping what was started then failed too: %v)", err, cerr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	primary := c.nodes[0]
	for _, n := range c.nodes {
		var extra []string
		if c.spec.Descriptor().HasSentinels() && n != primary {
			extra = append(extra, fmt.Sprintf("replicaof %s %d", primary.Address, primary.Port))
		}
		for i := 0; i+1 < len(c.spec.MinReplicasArgs()); i += 2 {
			a := c.spec.MinReplicasArgs()
			extra = append(extra, strings.TrimPrefix(a[i], "--")+" "+a[i+1])
		}
		if err := c.launch(ctx, n, n.redisConf(c.spec.Persistence, extra)); err != nil {
			return err
		}
	}
	ready := c.nodes
	if c.resource != nil {
		if err := c.launch(ctx, c.resource, c.resource.redisConf(cluster.PersistNone, nil)); err != nil {
			return err
		}
		ready = append(ready, c.resource)
	}
	if err := c.waitAll(ctx, ready); err != nil {
		return err
	}
	if !c.spec.Descriptor().HasSentinels() {
		return nil
	}
	c.dep = &sentinelq.Deployment{MasterName: cluster.MasterName, FailoverTimeout: c.spec.FailoverTimeout}
	for _, n := range c.nodes {
		c.dep.Nodes = append(c.dep.Nodes, c.sentinelqProc(n))
	}
	if err := c.poll(ctx, "replicas connected to the primary", func(ctx context.Context) error {
		return c.dep.CheckReplication(ctx, primary.Name)
	}); err != nil {
		return err
	}
	for _, s := range c.sentinels {
		conf := s.sentinelHead() + cluster.SentinelConf(c.spec, primary.Address, strconv.Itoa(primary.Port), s.Address, strconv.Itoa(s.Port))
		if err := c.launch(ctx, s, conf); err != nil {
			return err
		}
		c.dep.Sentinels = append(c.dep.Sentinels, c.sentinelqProc(s))
	}
	if err := c.waitAll(ctx, c.sentinels); err != nil {
		return err
	}
	return c.poll(ctx, "the sentinels agree", c.dep.WaitHealthy)
}

func (c *Cluster) sentinelqProc(p *proc) sentinelq.Proc {
	a := redis.NewClient(sentinelq.AdminOptions(p.Client))
	c.admins = append(c.admins, a)
	return sentinelq.Proc{Name: p.Name, Announce: net.JoinHostPort(p.Address, strconv.Itoa(p.Port)), Client: a}
}

func (c *Cluster) poll(ctx context.Context, what string, check func(context.Context) error) error {
	if c.b.Runner.Dry() {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, sentinelq.HealthyTimeout)
	defer cancel()
	if err := sentinelq.Poll(pctx, what, check); err != nil {
		return fmt.Errorf("start the %s system: %w", c.spec.System, err)
	}
	return nil
}

// launch writes a process's configuration and starts it. The marker is
// written first: a run killed right after the start still stops it.
func (c *Cluster) launch(ctx context.Context, p *proc, conf string) error {
	cmds := []string{
		"mkdir -p " + p.Dir,
		// What an earlier run at persistence everysec or always left
		// would be loaded as this run's data.
		fmt.Sprintf("rm -rf %s %s %s", p.file("appendonlydir"), p.file("dump.rdb"), p.file(logFile)),
		heredoc(p.file(confFile), conf),
	}
	if p.env != "" {
		cmds = append(cmds, heredoc(p.file(clockFile), fakeclock.Offset(0, 1)+"\n"))
	}
	for _, cmd := range cmds {
		if _, err := c.b.Runner.Run(ctx, p.Process, cmd); err != nil {
			return fmt.Errorf("prepare %s: %w", p.Name, err)
		}
	}
	c.mu.Lock()
	p.started = true
	c.mu.Unlock()
	if err := c.writeMarker(ctx, p); err != nil {
		return err
	}
	if _, err := c.b.Runner.Run(ctx, p.Process, p.startCmd()); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	return nil
}

// writeMarker rewrites p's marker from its fault state.
func (c *Cluster) writeMarker(ctx context.Context, p *proc) error {
	c.mu.Lock()
	cmd := p.markerCmd()
	c.mu.Unlock()
	if _, err := c.b.Runner.Run(ctx, p.Process, cmd); err != nil {
		return fmt.Errorf("write the marker of %s: %w", p.Name, err)
	}
	return nil
}

func (c *Cluster) waitAll(ctx context.Context, ps []*proc) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { errs[i] = c.waitReady(ctx, p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitReady polls PING on the client address until it answers.
func (c *Cluster) waitReady(ctx context.Context, p *proc) error {
	if c.b.Runner.Dry() {
		return nil
	}
	rdb := redis.NewClient(sentinelq.AdminOptions(p.Client))
	defer rdb.Close()
	deadline := time.Now().Add(ReadyTimeout)
	var err error
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, sentinelq.AdminTimeout)
		err = rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	tail, _ := c.b.Runner.Run(context.WithoutCancel(ctx), p.Process, "tail -n 15 "+p.file(logFile))
	return fmt.Errorf("%s does not answer PING on %s after %s: %w\n--- log of %s:\n%s", p.Name, p.Client, ReadyTimeout, err, p.Name, tail)
}

func (p *proc) info() cluster.Node {
	return cluster.Node{Name: p.Name, Role: p.role, Addr: p.Client,
		Announce: net.JoinHostPort(p.Address, strconv.Itoa(p.Port))}
}

// Nodes are the redis nodes under test.
func (c *Cluster) Nodes() []cluster.Node { return infos(c.nodes) }

// Sentinels are the sentinels (none but on the sentinel system).
func (c *Cluster) Sentinels() []cluster.Node { return infos(c.sentinels) }

func infos(ps []*proc) []cluster.Node {
	out := make([]cluster.Node, len(ps))
	for i, p := range ps {
		out[i] = p.info()
	}
	return out
}

// Resource is the protected resource store, nil unless the spec asked.
func (c *Cluster) Resource() *cluster.Node {
	if c.resource == nil {
		return nil
	}
	n := c.resource.info()
	return &n
}

// Close heals every fault, stops the servers lockjepsen started, and
// collects each process's log and configuration into the run directory.
// A heal that fails is reported with the commands that undo it by hand.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		ctx := context.WithoutCancel(ctx)
		var errs []error
		for _, p := range c.started() {
			errs = append(errs, c.closeProc(ctx, p))
		}
		for _, a := range c.admins {
			a.Close()
		}
		errs = append(errs, c.saveCommands())
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// all are the processes under test: the sentinels and the nodes.
func (c *Cluster) all() []*proc {
	return append(append([]*proc(nil), c.sentinels...), c.nodes...)
}

// started are all and the resource store: what Close stops.
func (c *Cluster) started() []*proc {
	if c.resource == nil {
		return c.all()
	}
	return append(c.all(), c.resource)
}

// closeProc undoes p's faults and stops it, then collects its files.
func (c *Cluster) closeProc(ctx context.Context, p *proc) error {
	c.mu.Lock()
	undo := p.undo()
	c.mu.Unlock()
	var failed []string
	for _, cmd := range undo {
		if _, err := c.b.Runner.Run(ctx, p.Process, cmd); err != nil {
			failed = append(failed, cmd)
		}
	}
	c.collect(ctx, p)
	if len(failed) > 0 {
		return fmt.Errorf("heal %s on %s failed; undo it by hand there (as %s):\n  %s\n(the marker %s lists them too; the next run retries it)",
			p.Name, p.SSH, p.User, strings.Join(failed, "\n  "), p.file(MarkerFile))
	}
	c.mu.Lock()
	p.paused, p.rules, p.netem, p.started = false, nil, false, false
	c.mu.Unlock()
	return c.writeMarker(ctx, p)
}

// collect copies p's log and configuration into the run directory, as
// the local backend keeps its nodes' logs.
func (c *Cluster) collect(ctx context.Context, p *proc) {
	if c.b.Runner.Dry() || c.spec.Dir == "" {
		return
	}
	dir := filepath.Join(c.spec.Dir, "nodes", p.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	base := map[string]string{RoleSentinel: "sentinel", RoleRedis: "redis", RoleResource: "resource"}[p.Role]
	for src, dst := range map[string]string{logFile: base + ".log", confFile: base + ".conf"} {
		if out, err := c.b.Runner.Run(ctx, p.Process, "cat "+p.file(src)); err == nil {
			_ = os.WriteFile(filepath.Join(dir, dst), []byte(out), 0o644)
		}
	}
}

// saveCommands writes every command run on the hosts into the run
// directory (ssh-commands.log).
func (c *Cluster) saveCommands() error {
	if c.b.Runner.Dry() || c.spec.Dir == "" {
		return nil
	}
	log := strings.Join(c.b.Runner.Log(), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(c.spec.Dir, "ssh-commands.log"), []byte(log), 0o644); err != nil {
		return fmt.Errorf("save the ssh command log: %w", err)
	}
	return nil
}
