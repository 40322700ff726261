// Package docker runs lockjepsen's systems as containers: Backend starts
// them with testcontainers-go on a private Docker network, ComposeBackend
// attaches to a deployment brought up with docker-compose.yml.
//
// Every node publishes its Redis port on 127.0.0.1 only, so Node.Addr is a
// loopback host:port that the harness dials directly or through its
// in-process proxies. The nemesis acts through the Docker API: Pause and
// Resume are docker pause/unpause, Kill is a SIGKILL of the container and
// Restart starts the same container again (same published port, same
// writable layer and so the same data), and SetClock rewrites libfaketime's
// offset file inside the container.
//
// The sentinel system (a primary, replicas and sentinels) runs too: its
// internal traffic goes through a toxiproxy server container on the same
// private network, which the cluster drives through toxiproxy's HTTP API to
// cut one process off from the rest (nemesis.InternalNet); see toxiproxy.go
// and sentinel.go. cluster.Spec.Mesh is ignored by both backends: processes
// in containers cannot reach the harness's loopback proxies.
//
// Clock faults need an image that carries libfaketime and the allocator
// shim: the image built by docker/build-image.sh does, and says so with the
// io.lockjepsen.fakeclock.preload label. Start refuses a spec with FakeClock
// on an image without that label, before any container is created.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// DefaultImage is the image Backend uses when none is given: the one
// docker/build-image.sh builds from Debian's packages on this machine.
const DefaultImage = "lockjepsen/redis:7.0.15-debian"

// OfficialImage is the image to pass elsewhere (it has no libfaketime, so
// clock faults are refused with it).
const OfficialImage = "redis:7.2"

// ImageEnv overrides DefaultImage when Backend.Image is empty (the compose
// file reads the same variable).
const ImageEnv = "LOCKJEPSEN_REDIS_IMAGE"

// DefaultToxiproxyImage is the toxiproxy server of the sentinel system's
// internal links (and of docker-compose.yml): the one
// `docker/build-image.sh --toxiproxy` builds from the Go module.
const DefaultToxiproxyImage = "lockjepsen/toxiproxy:2.5.0"

// OfficialToxiproxyImage is the toxiproxy image to use elsewhere.
const OfficialToxiproxyImage = "ghcr.io/shopify/toxiproxy:2.5.0"

// ToxiproxyImageEnv overrides DefaultToxiproxyImage when
// Backend.ToxiproxyImage is empty (the compose file reads it too).
const ToxiproxyImageEnv = "LOCKJEPSEN_TOXIPROXY_IMAGE"

// Labels.
const (
	// LabelPreload, on an image, is the LD_PRELOAD value (the allocator
	// shim, then libfaketime) that gives redis a movable clock.
	LabelPreload = "io.lockjepsen.fakeclock.preload"
	// LabelBackend marks the containers and networks this package creates.
	LabelBackend = "io.lockjepsen.backend"
	// LabelOwner is "<hostname>/<pid>" of the process that created them,
	// so that a later run can remove what a killed one left behind.
	LabelOwner = "io.lockjepsen.owner"
	// LabelOwnerStart is the owner process's start time (clock ticks
	// since boot, /proc/<pid>/stat): a live process with the owner's PID
	// but another start time is not the owner (the PID was reused).
	LabelOwnerStart = "io.lockjepsen.owner-start"
	// LabelNode is the node's name.
	LabelNode = "io.lockjepsen.node"
	// LabelRun is the random ID of one cluster: every container and the
	// network of one Start carry it, so that what was created can be
	// found and removed even when the call that created it was cut short
	// (a cancelled start) and its ID never came back.
	LabelRun = "io.lockjepsen.run"
	// LabelRunDir is the run directory (cluster.Spec.Dir) of the cluster,
	// named in the report of a later run that removes it.
	LabelRunDir = "io.lockjepsen.run-dir"
)

// ClockFile is libfaketime's offset file inside a container.
const ClockFile = "/tmp/lockjepsen-faketime"

// RedisPort is the port redis listens on inside a container.
const RedisPort = 6379

// SentinelPort is the port redis-sentinel listens on inside a container.
const SentinelPort = 26379

// ErrNoEngine means no Docker engine answered. The CLI maps it to a harness
// error (exit 3); tests skip on it.
var ErrNoEngine = errors.New("no Docker engine is reachable")

// ErrNoFakeClock means the image cannot run clock faults.
var ErrNoFakeClock = errors.New("the image has no libfaketime")

// ErrImageMissing means the default image has not been built.
var ErrImageMissing = errors.New("image not present")

// Readiness deadlines, sized for a cold, loaded machine (2 cores busy with
// compiling and -race tests): every wait polls and, when its deadline
// passes, says what was still missing.
const (
	// StartTimeout bounds the creation and start of one container (create,
	// copy its files in, start), and the creation of the network:
	// milliseconds on an idle machine, seconds when dockerd competes for
	// the cores with compilers and the first start of an image unpacks its
	// layers.
	StartTimeout = 2 * time.Minute
	// ReadyTimeout bounds how long a started container's service (redis
	// PING, toxiproxy's API) may take to answer: redis answers in
	// milliseconds once exec'd, so the time is spent in dockerd's
	// networking (port publishing) under load.
	ReadyTimeout = 60 * time.Second
	// SentinelAgreeTimeout bounds each wait of the sentinel system's start:
	// until the primary lists every replica, and until the sentinels agree
	// on the topology. A sentinel learns replicas from the primary's INFO,
	// which it asks for every 10 s, and other sentinels from hello messages
	// every 2 s: one missed period costs 10 s, and a loaded machine can
	// miss more than one.
	SentinelAgreeTimeout = 60 * time.Second
	// cleanupTimeout bounds the removal of a cluster's containers and
	// network (Close, or a failed or cancelled Start), whatever the
	// caller's context says.
	cleanupTimeout = 60 * time.Second
)

// Logger receives testcontainers-go's messages; silent unless
// LOCKJEPSEN_DOCKER_DEBUG is set.
func logger() tclog.Logger {
	if os.Getenv("LOCKJEPSEN_DOCKER_DEBUG") != "" {
		return tclog.Default()
	}
	return tclog.NewNoopLogger()
}

var ryukOnce sync.Once

// configureRyuk disables testcontainers' reaper (Ryuk) when its image is
// not present locally: it cannot be pulled without a registry, and every
// container would fail to start. The setting must be in place before
// testcontainers first reads its configuration, so it is decided once per
// process, before any provider exists. TESTCONTAINERS_RYUK_DISABLED set by
// the user wins. Containers are removed by Cluster.Close either way, and
// the ones a killed run left are removed by Backend.ReapOrphans, which the
// harness calls before each run.
func configureRyuk(ctx context.Context) {
	ryukOnce.Do(func() {
		// testcontainers prints its own banner through the default
		// logger whatever logger a request names; keep the harness's
		// output clean.
		if os.Getenv("LOCKJEPSEN_DOCKER_DEBUG") == "" {
			tclog.SetDefault(tclog.NewNoopLogger())
		}
		if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); set {
			return
		}
		cli, err := client.New(client.FromEnv)
		if err != nil {
			os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := cli.ImageInspect(ctx, testcontainers.ReaperDefaultImage); err != nil {
			os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
	})
}

// engine is a connection to the Docker engine.
type engine struct {
	provider *testcontainers.DockerProvider
	cli      client.APIClient
}

// connect reaches the Docker engine or fails at once with ErrNoEngine.
func connect(ctx context.Context) (*engine, error) {
	configureRyuk(ctx)
	p, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(logger()))
	if err != nil {
		return nil, fmt.Errorf("%w (%v): start dockerd, or set DOCKER_HOST; the local backend needs no Docker", ErrNoEngine, err)
	}
	cli := p.Client()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		p.Close()
		return nil, fmt.Errorf("%w (%v): start dockerd, or set DOCKER_HOST; the local backend needs no Docker", ErrNoEngine, err)
	}
	return &engine{provider: p, cli: cli}, nil
}

func (e *engine) close() { e.provider.Close() }

// Available reports whether a Docker engine answers, and why not.
func Available(ctx context.Context) error {
	e, err := connect(ctx)
	if err != nil {
		return err
	}
	e.close()
	return nil
}

// imageLabels inspects a local image; found is false if it is absent.
func (e *engine) imageLabels(ctx context.Context, image string) (labels map[string]string, found bool, err error) {
	res, err := e.cli.ImageInspect(ctx, image)
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "no such image") || isNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("inspect image %s: %w", image, err)
	}
	if res.Config != nil {
		labels = res.Config.Labels
	}
	return labels, true, nil
}

// ensureImage returns the labels of a local image, pulling it first if it
// is absent and is not ours (ours, def, is built by the named script; no
// registry has it). flag says how to pass another image.
func (e *engine) ensureImage(ctx context.Context, image, def, official, script, flag string) (map[string]string, error) {
	labels, found, err := e.imageLabels(ctx, image)
	if err != nil {
		return nil, err
	}
	if found {
		return labels, nil
	}
	if image == def {
		return nil, fmt.Errorf("%w: %s has not been built on this machine: run %s (or pass an image such as %s with %s)", ErrImageMissing, image, script, official, flag)
	}
	if err := e.pull(ctx, image); err != nil {
		return nil, fmt.Errorf("%w: %s is not present locally and could not be pulled: %v", ErrImageMissing, image, err)
	}
	labels, _, err = e.imageLabels(ctx, image)
	return labels, err
}

// pull fetches an image that is not present (for users with a registry).
func (e *engine) pull(ctx context.Context, image string) error {
	rc, err := e.cli.ImagePull(ctx, image, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// owner identifies this process among the containers' labels.
func owner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// processStart is a process's start time in clock ticks since boot (field
// 22 of /proc/<pid>/stat), "" if it cannot be read.
func processStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// OwnerLabels name this process (host, PID and start time) as the owner
// of a container or network, as Orphaned reads them. The backend puts
// them on everything it creates; a test fixture that makes containers of
// its own (contrib/ssh/sshtest's hosts) puts them on its own, so that the
// next test binary can remove what a panic or a test timeout left.
func OwnerLabels() map[string]string {
	l := map[string]string{LabelOwner: owner()}
	if st := processStart(os.Getpid()); st != "" {
		l[LabelOwnerStart] = st
	}
	return l
}

// Orphaned reports whether what carries labels (OwnerLabels) was made by
// a process of this host that is gone.
func Orphaned(labels map[string]string) bool {
	_, orphan := orphanOwner(labels)
	return orphan
}

// ownerLabels are the labels of everything this process creates for the
// cluster with the given ID and run directory.
func ownerLabels(id, dir string) map[string]string {
	l := OwnerLabels()
	l[LabelBackend], l[LabelRun] = "docker", id
	if dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		l[LabelRunDir] = dir
	}
	return l
}

func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
