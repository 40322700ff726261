package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/clusterq"
	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
)

// Backend starts clusters as containers with testcontainers-go.
type Backend struct {
	// Image is the Redis image of every node; "" means $LOCKJEPSEN_REDIS_IMAGE,
	// else DefaultImage. Any image whose redis-server is on PATH works
	// (redis:7.2, valkey/valkey:8); clock faults need one built by
	// docker/build-image.sh.
	Image string
	// ToxiproxyImage is the toxiproxy server that carries the sentinel
	// system's internal links; "" means $LOCKJEPSEN_TOXIPROXY_IMAGE, else
	// DefaultToxiproxyImage.
	ToxiproxyImage string
}

// The docker backend removes what killed runs left, and says so.
var _ cluster.OrphanReaper = Backend{}

// Name is "docker".
func (Backend) Name() string { return "docker" }

// image is the image the backend runs.
func (b Backend) image() string { return imageOf(b.Image, ImageEnv, DefaultImage) }

func (b Backend) toxiproxyImage() string {
	return imageOf(b.ToxiproxyImage, ToxiproxyImageEnv, DefaultToxiproxyImage)
}

// imageOf is the image asked for, else the one the environment variable
// env names, else def.
func imageOf(asked, env, def string) string {
	if asked != "" {
		return asked
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// Cluster is a running set of containers.
type Cluster struct {
	containerCluster[*node]
	// id is the cluster's LabelRun, dir its run directory (LabelRunDir).
	id, dir  string
	net      *testcontainers.DockerNetwork
	resource *node

	// The sentinel system (sentinel.go): the sentinels, the container of
	// the toxiproxy server that carries the internal links, and clients
	// for configuring the nodes.
	sentinels []*node
	toxi      *node
	// toxiIP is the toxiproxy container's address on the private network.
	toxiIP string
	admins []*redis.Client

	// The cluster system (rediscluster.go): its shared queries. Its
	// toxiproxy server is toxi and internal, as above.
	slots *clusterq.Deployment

	// cancelled is set when Start was cancelled: Close then saves no
	// logs and waits until nothing labelled with the cluster's ID is left.
	cancelled bool
	closeOnce sync.Once
	closeErr  error
}

// node is one container.
type node struct {
	name, role string
	hostPort   int // the loopback port its service is published on
	logPath    string
	// announce is the address the rest of the cluster knows it by (the
	// sentinel system: its internal proxy), "" if none.
	announce string
	c        *testcontainers.DockerContainer
}

func (n *node) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.hostPort)) }

func (n *node) containerID() string { return n.c.GetContainerID() }

// Start checks the engine and the image, then starts the spec's containers
// on a new private network and waits until each answers PING (the sentinel
// system: until it is healthy). Each wait has a deadline of its own
// (StartTimeout, ReadyTimeout, SentinelAgreeTimeout) and says what was
// still missing when it passes. Whatever was created is removed again on
// error.
//
// When ctx is cancelled (Ctrl-C) at any point, Start removes everything it
// had created so far, containers in any state and the network included,
// with a fresh bounded context, and returns an error that wraps ctx's
// (errors.Is(err, context.Canceled)); it dumps no logs: a cancelled start
// is not a failure to diagnose.
//
// Start does not remove what earlier, killed runs left: ReapOrphans does,
// and says what it removed (the harness calls it before each run).
//
// spec.Mesh is ignored: processes in containers cannot reach the host's
// loopback proxies. The sentinel system's internal links go through a
// toxiproxy server container instead (see toxiproxy.go), which the
// cluster exposes to the nemesis as nemesis.InternalNet.
func (b Backend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := b.Fit(spec); err != nil {
		return nil, err
	}
	spec = spec.WithDefaults()
	spec.Mesh = nil // see above: never used by this backend
	eng, img, err := b.prepare(ctx, spec)
	if err != nil {
		return nil, err
	}
	c := &Cluster{id: randomID(), dir: spec.Dir, containerCluster: containerCluster[*node]{
		eng: eng, fakeClock: spec.FakeClock,
		noClock: "the cluster was started without a fake clock",
		noLinks: fmt.Sprintf("the %s system's nodes have none (only the sentinel system has internal traffic)", spec.System),
	}}
	c.notReady = func(n *node, err error) error {
		return fmt.Errorf("restart node %s on %s: %w\n--- log of %s:\n%s", n.name, n.addr(), err, n.name, c.logTail(n, 15))
	}
	fail := func(err error) (cluster.Cluster, error) {
		if ctx.Err() != nil {
			// Ctrl-C: remove everything, including what was being
			// created when the cancel came, and dump nothing.
			c.cancelled = true
			return nil, interrupted(ctx, c.Close(ctx))
		}
		if cerr := c.Close(ctx); cerr != nil {
			err = fmt.Errorf("%w\n(removing the cluster's containers then failed too: %v)", err, cerr)
		}
		return nil, err
	}
	nctx, cancel := context.WithTimeout(ctx, StartTimeout)
	nw, err := tcnetwork.New(nctx, tcnetwork.WithLabels(ownerLabels(c.id, c.dir)))
	cancel()
	if err != nil {
		if ctx.Err() == nil && nctx.Err() != nil {
			err = fmt.Errorf("no answer within %s: %w", StartTimeout, err)
		}
		return fail(fmt.Errorf("create a docker network: %w", err))
	}
	c.net = nw
	start := map[cluster.Reach]func(context.Context, cluster.Spec, string, string, string) error{
		cluster.ReachSentinels: c.startSentinel, cluster.ReachSlots: c.startRedisCluster,
	}[spec.Descriptor().Reach]
	if start == nil {
		start = c.startIndependent
	}
	if err := start(ctx, spec, img.redis, img.toxiproxy, img.preload); err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	return c, nil
}

// startImages are the images a start runs, and the LD_PRELOAD value of
// the Redis image's clock-fault files.
type startImages struct{ redis, toxiproxy, preload string }

// prepare connects to the engine and makes sure the images spec needs are
// there (the toxiproxy server's only for the systems with internal
// links). On an error it closes the engine; a cancelled ctx gives
// interrupted's error.
func (b Backend) prepare(ctx context.Context, spec cluster.Spec) (*engine, startImages, error) {
	img := startImages{redis: b.image(), toxiproxy: b.toxiproxyImage()}
	eng, err := connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, img, interrupted(ctx, nil)
		}
		return nil, img, err
	}
	refuse := func(err error) (*engine, startImages, error) {
		eng.close()
		if ctx.Err() != nil {
			return nil, img, interrupted(ctx, nil)
		}
		return nil, img, err
	}
	labels, err := eng.ensureImage(ctx, img.redis, DefaultImage, OfficialImage, "docker/build-image.sh", "--image")
	if err != nil {
		return refuse(err)
	}
	if spec.Descriptor().Peers != "" {
		if _, err := eng.ensureImage(ctx, img.toxiproxy, DefaultToxiproxyImage, OfficialToxiproxyImage, "docker/build-image.sh --toxiproxy", "$"+ToxiproxyImageEnv); err != nil {
			return refuse(fmt.Errorf("the %s system's internal links need a toxiproxy server: %w", spec.System, err))
		}
	}
	img.preload = labels[LabelPreload]
	if spec.FakeClock && img.preload == "" {
		return refuse(fmt.Errorf("clock faults on the docker backend: %w: image %s has no %s label (clock faults need libfaketime and lockjepsen's allocator shim in the image; build one with docker/build-image.sh, or run clock faults on the local backend)", ErrNoFakeClock, img.redis, LabelPreload))
	}
	return eng, img, nil
}

// startIndependent starts the nodes of the systems without internal
// links (single, redlock: independent Redis servers) and the resource,
// all at once.
func (c *Cluster) startIndependent(ctx context.Context, spec cluster.Spec, image, _, preload string) error {
	for i := 1; i <= spec.Nodes; i++ {
		c.nodes = append(c.nodes, &node{name: fmt.Sprintf("n%d", i), role: cluster.RoleNode})
	}
	if spec.Resource {
		c.resource = &node{name: "resource", role: cluster.RoleResource}
	}
	all := c.all()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		n.logPath = filepath.Join(spec.Dir, "nodes", n.name, "redis.log")
		wg.Go(func() {
			args := []string{"--appendonly", "no"}
			var env map[string]string
			if n.role != cluster.RoleResource {
				args = persistenceArgs(spec.Persistence)
				if spec.FakeClock {
					env = fakeClockEnv(preload)
				}
			}
			errs[i] = c.startNode(ctx, n, redisContainer(image, args, env), c.waitPing)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// interrupted is the error of a start that ctx cut short; cleanup is what
// removing what it had created returned.
func interrupted(ctx context.Context, cleanup error) error {
	if cleanup != nil {
		return fmt.Errorf("interrupted while starting: %w; removing what had been created failed: %v", ctx.Err(), cleanup)
	}
	return fmt.Errorf("interrupted while starting (everything created so far was removed): %w", ctx.Err())
}

func persistenceArgs(mode string) []string {
	switch mode {
	case cluster.PersistEverysec, cluster.PersistAlways:
		return []string{"--appendonly", "yes", "--appendfsync", mode}
	}
	return []string{"--appendonly", "no"}
}

func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort asks the kernel for a free loopback port. The port is bound by
// Docker explicitly (not left to Docker's ephemeral choice) so that a
// restarted container comes back on the same address.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ctrSpec is what one container runs.
type ctrSpec struct {
	image string
	cmd   []string
	env   map[string]string
	// port is the container's port that is published on 127.0.0.1.
	port  int
	files []testcontainers.ContainerFile
	// aliases are network names besides the node's own.
	aliases []string
}

// redisCmd is the command line of a redis-server node: an optional
// configuration file, the fixed options, then args.
func redisCmd(configFile string, args []string) []string {
	cmd := []string{"redis-server"}
	if configFile != "" {
		cmd = append(cmd, configFile)
	}
	cmd = append(cmd,
		"--port", strconv.Itoa(RedisPort),
		"--bind", "0.0.0.0",
		"--protected-mode", "no",
		"--dir", "/data",
		"--save", "",
		"--logfile", "",
		"--daemonize", "no",
		"--enable-debug-command", "local",
	)
	return append(cmd, args...)
}

// redisContainer is a plain redis-server node (env: the fake clock's, or
// nil).
func redisContainer(image string, args []string, env map[string]string) ctrSpec {
	s := ctrSpec{image: image, cmd: redisCmd("", args), env: env, port: RedisPort}
	s.withClockFile()
	return s
}

// withClockFile writes libfaketime's offset file into a node that runs
// under it, before redis starts: a missing file means real time, but
// writing it first keeps the first SetClock a plain replacement.
func (s *ctrSpec) withClockFile() {
	if s.env != nil {
		s.files = append(s.files, testcontainers.ContainerFile{
			Reader: strings.NewReader(fakeclock.Offset(0, 1) + "\n"), ContainerFilePath: ClockFile, FileMode: 0o644,
		})
	}
}

// startNode creates and starts one node's container, retrying with another
// port if the chosen one was taken in the meantime, and waits until ready
// says it serves on its published address.
func (c *Cluster) startNode(ctx context.Context, n *node, s ctrSpec, ready func(ctx context.Context, n *node) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if n.hostPort, err = freePort(); err != nil {
			return fmt.Errorf("start node %s: pick a port: %w", n.name, err)
		}
		err = c.createNode(ctx, n, s)
		if err == nil {
			break
		}
		msg := err.Error()
		if ctx.Err() != nil || (!strings.Contains(msg, "already allocated") && !strings.Contains(msg, "address already in use")) {
			return err
		}
		// A container that was created but could not bind its port keeps
		// the name the next attempt needs.
		c.removeByName(ctx, c.containerName(n.name))
	}
	if err != nil {
		return err
	}
	if err := ready(ctx, n); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("start node %s: %w", n.name, ctx.Err())
		}
		return fmt.Errorf("start node %s (%s) on %s: %w\n--- log of %s:\n%s", n.name, s.image, n.addr(), err, n.name, c.logTail(n, 15))
	}
	return nil
}

func (c *Cluster) containerName(node string) string {
	return fmt.Sprintf("lockjepsen-%s-%s", c.id, node)
}

// createNode creates and starts one container, within StartTimeout. When
// the deadline passes, the error says what state the container was left
// in (created: dockerd never got to start it).
func (c *Cluster) createNode(ctx context.Context, n *node, s ctrSpec) error {
	port := network.MustParsePort(fmt.Sprintf("%d/tcp", s.port))
	name := c.containerName(n.name)
	labels := ownerLabels(c.id, c.dir)
	labels[LabelNode] = n.name
	req := testcontainers.ContainerRequest{
		Image:          s.image,
		Name:           name,
		Cmd:            s.cmd,
		Env:            s.env,
		ExposedPorts:   []string{port.String()},
		Networks:       []string{c.net.Name},
		NetworkAliases: map[string][]string{c.net.Name: append([]string{n.name}, s.aliases...)},
		Labels:         labels,
		Files:          s.files,
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(n.hostPort)}}}
		},
	}
	cctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	ctr, err := testcontainers.GenericContainer(cctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req, Started: true, Logger: logger(),
	})
	if err == nil {
		if dc, ok := ctr.(*testcontainers.DockerContainer); ok {
			n.c = dc
			return nil
		}
		err = fmt.Errorf("testcontainers returned a %T", ctr)
	}
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("start node %s: %w", n.name, ctx.Err())
	case cctx.Err() != nil:
		err = fmt.Errorf("start node %s: container %s not running %s after it was asked for: %s", n.name, name, StartTimeout, describeContainer(ctx, c.eng.cli, name))
	default:
		err = fmt.Errorf("start node %s (image %s): %w", n.name, s.image, err)
	}
	// Whatever was created goes (Close also sweeps by label, for a
	// container whose ID never came back).
	if ctr != nil {
		if dc, ok := ctr.(*testcontainers.DockerContainer); ok && dc.GetContainerID() != "" {
			c.removeByName(ctx, dc.GetContainerID())
		}
	}
	return err
}

// removeByName force-removes a container (by name or ID) with a fresh
// bounded context; one that does not exist is no error.
func (c *Cluster) removeByName(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	_, _ = c.eng.cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
}

// describeContainer says what state a container is in, for an error:
// "state=created", "state=exited, exit code 1", "no such container".
func describeContainer(ctx context.Context, cli client.APIClient, id string) string {
	_, desc := inspectState(ctx, cli, id)
	return desc
}

// inspectState inspects a container: running says whether it runs (true
// when that cannot be told), desc describes its state.
func inspectState(ctx context.Context, cli client.APIClient, id string) (running bool, desc string) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	res, err := cli.ContainerInspect(ictx, id, inspectOpts)
	if err != nil {
		if isNotFound(err) {
			return false, "no such container (its creation never completed, or it was removed)"
		}
		return true, "state unknown: " + err.Error()
	}
	st := res.Container.State
	if st == nil {
		return true, "state unknown"
	}
	d := "state=" + string(st.Status)
	if st.Status == container.StateExited || st.Status == container.StateDead {
		d += fmt.Sprintf(", exit code %d", st.ExitCode)
		if st.OOMKilled {
			d += ", killed for lack of memory"
		}
	}
	if st.Error != "" {
		d += ", error: " + st.Error
	}
	return st.Running, d
}

// containerCheck asks whether a container can still come to serve (it
// runs); desc says what state it is in.
type containerCheck func(ctx context.Context) (alive bool, desc string)

// checkOf is the containerCheck of a container (by name or ID).
func checkOf(cli client.APIClient, id string) containerCheck {
	return func(ctx context.Context) (bool, string) { return inspectState(ctx, cli, id) }
}

// waitPing waits until a node's redis answers PING on its published port.
func (c *Cluster) waitPing(ctx context.Context, n *node) error {
	return waitReady(ctx, n.addr(), checkOf(c.eng.cli, n.c.GetContainerID()))
}

// readyCheckEvery is how often a readiness poll also looks at the
// container: one that exited will never answer.
const readyCheckEvery = time.Second

// waitReady polls PING on addr until it answers or ReadyTimeout passes.
// With check, it fails at once when the container stops running, and the
// error says what state it is in.
func waitReady(ctx context.Context, addr string, check containerCheck) error {
	rc := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, PoolSize: 1, DisableIdentity: true,
	})
	defer rc.Close()
	return pollReady(ctx, readyPoll{
		every: 20 * time.Millisecond,
		try:   func(ctx context.Context) error { return rc.Ping(ctx).Err() },
		check: check,
		dead: func(desc string, last error) error {
			return fmt.Errorf("no answer to PING on %s: the container is not running (%s); PING: %v", addr, desc, last)
		},
		late: func(waited time.Duration, desc string, last error) error {
			if check == nil {
				desc = "container not checked"
			}
			return fmt.Errorf("no answer to PING on %s after %s (container %s): %v", addr, waited, desc, last)
		},
	})
}

// readyPoll is a wait for a container's service: try, every so often,
// until it succeeds. With check, the container's state is looked at every
// readyCheckEvery too, as one that stopped running will never answer.
type readyPoll struct {
	every time.Duration
	try   func(ctx context.Context) error
	check containerCheck
	// dead is the error once check finds the container not running, late
	// once ReadyTimeout has passed (desc: its state, "" if check is nil);
	// last is try's last error.
	dead func(desc string, last error) error
	late func(waited time.Duration, desc string, last error) error
}

// pollReady runs p for at most ReadyTimeout. When ctx itself ends, it
// returns ctx's error, not p's.
func pollReady(ctx context.Context, p readyPoll) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	start := time.Now()
	nextCheck := start.Add(readyCheckEvery)
	var last error
	for {
		if last = p.try(ctx); last == nil {
			return nil
		}
		if parent.Err() != nil {
			return parent.Err()
		}
		if p.check != nil && time.Now().After(nextCheck) {
			nextCheck = time.Now().Add(readyCheckEvery)
			if alive, desc := p.check(ctx); !alive {
				return p.dead(desc, last)
			}
		}
		t := time.NewTimer(p.every)
		select {
		case <-ctx.Done():
			t.Stop()
			if parent.Err() != nil {
				return parent.Err()
			}
			desc := ""
			if p.check != nil {
				_, desc = p.check(parent)
			}
			return p.late(time.Since(start).Round(time.Millisecond), desc, last)
		case <-t.C:
		}
	}
}

// all are the cluster's containers: nodes, sentinels, the toxiproxy server
// and the resource.
func (c *Cluster) all() []*node {
	all := append(append([]*node{}, c.nodes...), c.sentinels...)
	if c.toxi != nil {
		all = append(all, c.toxi)
	}
	if c.resource != nil {
		all = append(all, c.resource)
	}
	return all
}

func (n *node) info() cluster.Node {
	return cluster.Node{Name: n.name, Role: n.role, Addr: n.addr(), Announce: n.announce, LogPath: n.logPath}
}

// Resource is the protected resource store, or nil.
func (c *Cluster) Resource() *cluster.Node {
	if c.resource == nil {
		return nil
	}
	n := c.resource.info()
	return &n
}

// Containers maps node names (and "toxiproxy") to container IDs.
func (c *Cluster) Containers() map[string]string {
	out := map[string]string{}
	for _, n := range c.all() {
		if n.c != nil {
			out[n.name] = n.c.GetContainerID()
		}
	}
	return out
}

// Network is the name of the cluster's private network.
func (c *Cluster) Network() string {
	if c.net == nil {
		return ""
	}
	return c.net.Name
}

// Close saves each container's log under the run directory, then removes
// every container and the network, whatever the state of ctx (it may be
// cancelled: Ctrl-C), with a deadline of its own. It also removes anything
// else labelled with the cluster's ID: a container whose creation was cut
// short. It is safe to call more than once.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		for _, a := range c.admins {
			a.Close()
		}
		var errs []error
		var wg sync.WaitGroup
		if !c.cancelled {
			for _, n := range c.all() {
				if n.c != nil {
					wg.Go(func() { c.saveLog(ctx, n) })
				}
			}
			wg.Wait()
		}
		// One container at a time: dockerd that disconnects and removes
		// several containers of one network at once can keep a stale
		// endpoint, and the network can then never be removed
		// (moby#17217; seen here on a clean CI run with parallel
		// teardown, even with each container leaving the network first).
		for _, n := range c.all() {
			if n.c == nil {
				continue
			}
			id := n.c.GetContainerID()
			// A paused container cannot be stopped cleanly.
			_, _ = c.eng.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
			// Stopped, then out of the network, then removed: no
			// operation on the network races a container going away.
			zero := 0
			_, _ = c.eng.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &zero})
			if c.net != nil {
				_, _ = c.eng.cli.NetworkDisconnect(ctx, c.net.ID, client.NetworkDisconnectOptions{Container: id, Force: true})
			}
			_, err := c.eng.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove container of %s: %w", n.name, err))
			}
		}
		if err := c.sweep(ctx, c.cancelled); err != nil {
			errs = append(errs, err)
		}
		c.eng.close()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// sweep removes every container (in any state) and network labelled with
// the cluster's ID, listing them again until a listing finds nothing: a
// network cannot be removed while a container being removed is still
// attached to it, which a loaded dockerd can take a while to finish. With
// settle it wants two empty listings in a row, sweepSettle apart: after a
// cancelled start, dockerd may still complete a create whose caller has
// gone.
func (c *Cluster) sweep(ctx context.Context, settle bool) error {
	f := make(client.Filters).Add("label", LabelRun+"="+c.id)
	quietNeeded := 1
	if settle {
		quietNeeded = 2
	}
	quiet := 0
	for {
		found, err := removeLabelled(ctx, c.eng.cli, f)
		if found == 0 && err == nil {
			if quiet++; quiet == quietNeeded {
				return nil
			}
		} else {
			quiet = 0
		}
		t := time.NewTimer(sweepSettle)
		select {
		case <-ctx.Done():
			t.Stop()
			if err == nil {
				err = fmt.Errorf("%d container(s) or network(s) still appearing", found)
			}
			return fmt.Errorf("remove the containers and network labelled %s=%s: %w", LabelRun, c.id, err)
		case <-t.C:
		}
	}
}

// sweepSettle is the pause between two listings of a settling sweep.
const sweepSettle = 300 * time.Millisecond

// removeLabelled removes the containers, then the networks, that match f;
// found counts what it found.
func removeLabelled(ctx context.Context, cli client.APIClient, f client.Filters) (found int, err error) {
	var errs []error
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	for _, ct := range cs.Items {
		found++
		if _, err := cli.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", containerLabel(ct.Names, ct.ID), err))
		}
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return found, errors.Join(append(errs, fmt.Errorf("list networks: %w", err))...)
	}
	for _, n := range ns.Items {
		found++
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}
	return found, errors.Join(errs...)
}

// containerLabel is a container's name for a message.
func containerLabel(names []string, id string) string {
	if len(names) > 0 {
		return strings.TrimPrefix(names[0], "/")
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// logs returns what a container wrote (redis logs to stdout).
func (c *Cluster) logs(ctx context.Context, n *node) ([]byte, error) {
	rc, err := c.eng.cli.ContainerLogs(ctx, n.c.GetContainerID(), client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		return out.Bytes(), err
	}
	return out.Bytes(), nil
}

func (c *Cluster) saveLog(ctx context.Context, n *node) {
	b, err := c.logs(ctx, n)
	if err != nil && len(b) == 0 {
		return
	}
	if err := os.MkdirAll(filepath.Dir(n.logPath), 0o755); err != nil {
		return
	}
	_ = os.WriteFile(n.logPath, b, 0o644)
}

func (c *Cluster) logTail(n *node, lines int) string {
	if n.c == nil {
		return "(no container)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, _ := c.logs(ctx, n)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
