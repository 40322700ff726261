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
	"github.com/lockjepsen/lockjepsen/cluster/local/fakeclock"
	"github.com/lockjepsen/lockjepsen/cluster/sentinelq"
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

// Name is "docker".
func (Backend) Name() string { return "docker" }

// image is the image the backend runs.
func (b Backend) image() string {
	if b.Image != "" {
		return b.Image
	}
	if v := os.Getenv(ImageEnv); v != "" {
		return v
	}
	return DefaultImage
}

func (b Backend) toxiproxyImage() string {
	if b.ToxiproxyImage != "" {
		return b.ToxiproxyImage
	}
	if v := os.Getenv(ToxiproxyImageEnv); v != "" {
		return v
	}
	return DefaultToxiproxyImage
}

// Cluster is a running set of containers.
type Cluster struct {
	eng       *engine
	net       *testcontainers.DockerNetwork
	nodes     []*node
	resource  *node
	fakeClock bool

	// The sentinel system (sentinel.go): the sentinels, the toxiproxy
	// server that carries the internal links, and the shared queries.
	sentinels []*node
	toxi      *node
	internal  *internalNet
	dep       *sentinelq.Deployment
	admins    []*redis.Client

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

// Start checks the engine and the image, then starts the spec's containers
// on a new private network and waits until each answers PING (the sentinel
// system: until it is healthy). Whatever was created is removed again on
// error.
//
// spec.Mesh is ignored: processes in containers cannot reach the host's
// loopback proxies. The sentinel system's internal links go through a
// toxiproxy server container instead (see toxiproxy.go), which the
// cluster exposes to the nemesis as nemesis.InternalNet.
func (b Backend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.System == cluster.Etcd {
		return nil, fmt.Errorf("the docker backend runs the %q, %q and %q systems; %q runs on the local backend", cluster.Single, cluster.Sentinel, cluster.Redlock, cluster.Etcd)
	}
	spec = spec.WithDefaults()
	spec.Mesh = nil // see above: never used by this backend
	image := b.image()
	eng, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	reapOrphans(ctx, eng)
	labels, err := eng.ensureImage(ctx, image, DefaultImage, OfficialImage, "docker/build-image.sh", "--image")
	if err != nil {
		eng.close()
		return nil, err
	}
	toxiImage := b.toxiproxyImage()
	if spec.System == cluster.Sentinel {
		if _, err := eng.ensureImage(ctx, toxiImage, DefaultToxiproxyImage, OfficialToxiproxyImage, "docker/build-image.sh --toxiproxy", "$"+ToxiproxyImageEnv); err != nil {
			eng.close()
			return nil, fmt.Errorf("the sentinel system's internal links need a toxiproxy server: %w", err)
		}
	}
	preload := labels[LabelPreload]
	if spec.FakeClock && preload == "" {
		eng.close()
		return nil, fmt.Errorf("clock faults on the docker backend: %w: image %s has no %s label (clock faults need libfaketime and lockjepsen's allocator shim in the image; build one with docker/build-image.sh, or run clock faults on the local backend)", ErrNoFakeClock, image, LabelPreload)
	}

	c := &Cluster{eng: eng, fakeClock: spec.FakeClock}
	fail := func(err error) (cluster.Cluster, error) {
		c.Close(context.Background())
		return nil, err
	}
	id := randomID()
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(map[string]string{LabelBackend: "docker", LabelOwner: owner()}))
	if err != nil {
		return fail(fmt.Errorf("create a docker network: %w", err))
	}
	c.net = nw
	if spec.System == cluster.Sentinel {
		if err := c.startSentinel(ctx, spec, image, toxiImage, id, preload); err != nil {
			return fail(err)
		}
		return c, nil
	}

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
			errs[i] = c.startNode(ctx, n, id, redisContainer(image, args, env), waitReady)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return c, nil
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
func (c *Cluster) startNode(ctx context.Context, n *node, id string, s ctrSpec, ready func(ctx context.Context, addr string) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if n.hostPort, err = freePort(); err != nil {
			return fmt.Errorf("start node %s: pick a port: %w", n.name, err)
		}
		err = c.createNode(ctx, n, id, s)
		if err == nil {
			break
		}
		msg := err.Error()
		if !strings.Contains(msg, "already allocated") && !strings.Contains(msg, "address already in use") {
			return err
		}
	}
	if err != nil {
		return err
	}
	if err := ready(ctx, n.addr()); err != nil {
		return fmt.Errorf("start node %s (%s) on %s: %w\n--- log of %s:\n%s", n.name, s.image, n.addr(), err, n.name, c.logTail(n, 15))
	}
	return nil
}

func (c *Cluster) createNode(ctx context.Context, n *node, id string, s ctrSpec) error {
	port := network.MustParsePort(fmt.Sprintf("%d/tcp", s.port))
	req := testcontainers.ContainerRequest{
		Image:          s.image,
		Name:           fmt.Sprintf("lockjepsen-%s-%s", id, n.name),
		Cmd:            s.cmd,
		Env:            s.env,
		ExposedPorts:   []string{port.String()},
		Networks:       []string{c.net.Name},
		NetworkAliases: map[string][]string{c.net.Name: append([]string{n.name}, s.aliases...)},
		Labels:         map[string]string{LabelBackend: "docker", LabelOwner: owner(), LabelNode: n.name},
		Files:          s.files,
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.PortBindings = network.PortMap{port: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(n.hostPort)}}}
		},
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: req, Started: true, Logger: logger(),
	})
	if ctr != nil {
		if dc, ok := ctr.(*testcontainers.DockerContainer); ok {
			if err == nil {
				n.c = dc
			} else {
				_ = dc.Terminate(context.Background(), testcontainers.StopTimeout(0))
			}
		}
	}
	if err != nil {
		return fmt.Errorf("start node %s (image %s): %w", n.name, s.image, err)
	}
	return nil
}

// waitReady polls PING until it answers or ReadyTimeout passes.
func waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	rc := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, PoolSize: 1, DisableIdentity: true,
	})
	defer rc.Close()
	var last error
	for {
		if last = rc.Ping(ctx).Err(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %v", ReadyTimeout, last)
		case <-time.After(20 * time.Millisecond):
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

// Nodes are the nodes under test.
func (c *Cluster) Nodes() []cluster.Node {
	out := make([]cluster.Node, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.info()
	}
	return out
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
// every container and the network. It is safe to call more than once.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		// The caller's context may already be cancelled (Ctrl-C):
		// removal must happen anyway.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		for _, a := range c.admins {
			a.Close()
		}
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for _, n := range c.all() {
			if n.c == nil {
				continue
			}
			wg.Go(func() {
				c.saveLog(ctx, n)
				id := n.c.GetContainerID()
				// A paused container cannot be stopped cleanly.
				_, _ = c.eng.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
				_, err := c.eng.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
				if err != nil && !isNotFound(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("remove container of %s: %w", n.name, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if c.net != nil {
			if _, err := c.eng.cli.NetworkRemove(ctx, c.net.ID, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove network %s: %w", c.net.Name, err))
			}
		}
		c.eng.close()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
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
