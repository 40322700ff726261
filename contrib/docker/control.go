package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local/fakeclock"
)

// The docker cluster pauses, kills and moves the clocks of its containers.
var (
	_ cluster.Pauser      = (*Cluster)(nil)
	_ cluster.Killer      = (*Cluster)(nil)
	_ cluster.ClockSetter = (*Cluster)(nil)
	_ cluster.Pauser      = (*ComposeCluster)(nil)
	_ cluster.Killer      = (*ComposeCluster)(nil)
	_ cluster.ClockSetter = (*ComposeCluster)(nil)
)

// opTimeout bounds one Docker API call of the nemesis.
const opTimeout = 15 * time.Second

func (c *Cluster) node(name string) (*node, error) {
	for _, n := range c.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %q", name)
}

// Pause freezes a node's container (docker pause: the cgroup freezer).
// Connections still open, reads time out.
func (c *Cluster) Pause(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return pauseContainer(c.eng.cli, name, n.c.GetContainerID())
}

// Resume unpauses a node's container.
func (c *Cluster) Resume(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return unpauseContainer(c.eng.cli, name, n.c.GetContainerID())
}

// ErrLoseUnsynced is returned by Kill with loseUnsynced: the container's
// append-only file lives in its writable layer, and cutting its tail from
// outside is not supported.
var ErrLoseUnsynced = errors.New("the docker backend cannot drop unsynced append-only-file writes on kill (lose-unsynced); use the local backend for that fault")

// Kill sends SIGKILL to a node's container and waits until it has stopped.
// The container, its published port and its data stay for Restart.
// loseUnsynced is refused (ErrLoseUnsynced) before anything is killed.
func (c *Cluster) Kill(name string, loseUnsynced bool) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return killNode(c.eng.cli, c.internal, name, n.c.GetContainerID(), loseUnsynced)
}

// killNode kills a node's container (both container backends). What the
// node had sent but the internal network had not delivered (a replication
// stream delayed by a latency fault) dies with it, as on a crashed
// machine: its internal proxies are disabled first, which drops their
// connections with what they held, and enabled again once it is dead. In
// the other order the bytes would be delivered while Docker kills the
// container (a few hundred ms), more than a latency fault holds them.
// loseUnsynced is refused before anything is killed.
func killNode(cli client.APIClient, internal *internalNet, name, containerID string, loseUnsynced bool) error {
	if loseUnsynced {
		return fmt.Errorf("kill %s: %w", name, ErrLoseUnsynced)
	}
	if internal == nil {
		return killContainer(cli, name, containerID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*opTimeout)
	defer cancel()
	return internal.whileDisabled(ctx, name, func() error { return killContainer(cli, name, containerID) })
}

// Restart starts a killed node's container again (same port, same data)
// and waits until it answers PING.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if err := startContainer(ctx, c.eng.cli, name, n.c.GetContainerID()); err != nil {
		return err
	}
	if err := waitReady(ctx, n.addr(), checkOf(c.eng.cli, n.c.GetContainerID())); err != nil {
		return fmt.Errorf("restart node %s on %s: %w\n--- log of %s:\n%s", name, n.addr(), err, name, c.logTail(n, 15))
	}
	return nil
}

// SetClock rewrites the node's libfaketime offset file inside its container
// (through the Docker API, so it works on a stopped container too).
func (c *Cluster) SetClock(name string, offset time.Duration) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if !c.fakeClock {
		return fmt.Errorf("set clock of %s: the cluster was started without a fake clock", name)
	}
	return setClock(c.eng.cli, name, n.c.GetContainerID(), offset)
}

func pauseContainer(cli client.APIClient, name, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", name, err)
	}
	return nil
}

func unpauseContainer(cli client.APIClient, name, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("resume %s: %w", name, err)
	}
	return nil
}

func killContainer(cli client.APIClient, name, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st, err := cli.ContainerInspect(ctx, id, inspectOpts)
	if err != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	if st.Container.State == nil || !st.Container.State.Running {
		return fmt.Errorf("kill %s: node is not running", name)
	}
	wait := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	if st.Container.State.Paused {
		// A frozen process cannot die until it is thawed.
		_, _ = cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	}
	select {
	case <-wait.Result:
		return nil
	case err := <-wait.Error:
		return fmt.Errorf("kill %s: waiting for the container to stop: %w", name, err)
	}
}

func startContainer(ctx context.Context, cli client.APIClient, name, id string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	return nil
}

func setClock(cli client.APIClient, name, id string, offset time.Duration) error {
	if err := fakeclock.Validate(offset, 1); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// The daemon replaces the file (unlink, create, one small write): a
	// clock read in between sees no file, which libfaketime takes as real
	// time for that read, never a partial line.
	content := []byte(fakeclock.Offset(offset, 1) + "\n")
	tarball, err := tarFile(ClockFile, content)
	if err != nil {
		return err
	}
	if _, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: tarball}); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	return nil
}

// ReapOrphans removes the containers and networks that runs of this
// backend in processes of this host left behind when they died without
// closing their cluster (SIGKILL gives no chance to clean up; Ryuk would
// do this where it can run), and returns one line per thing removed (or
// that could not be removed), for the user:
//
//	removed container lockjepsen-1a2b3c4d-n1 (state running) left by the killed run of pid 1234 (run directory store/…)
//
// It implements cluster.OrphanReaper; the harness calls it before each
// run. It never touches what a live process owns: an owner counts as gone
// only if no process has its PID, or the process that has it started at
// another time (the PID was reused). With no Docker engine it returns nil
// at once.
func (Backend) ReapOrphans(ctx context.Context) []string {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	cancel()
	if err != nil {
		return nil
	}
	ctx, cancel = context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	return reapOrphans(ctx, cli)
}

// orphanOwner says whether what carries labels belongs to a process of
// this host that is gone, and describes that run.
func orphanOwner(labels map[string]string) (run string, orphan bool) {
	host, _ := os.Hostname()
	h, pidText, ok := strings.Cut(labels[LabelOwner], "/")
	if !ok || h != host {
		return "", false
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return "", false
	}
	switch err := syscall.Kill(pid, 0); {
	case errors.Is(err, syscall.ESRCH):
		// No such process: the owner is gone.
	case err == nil || errors.Is(err, syscall.EPERM):
		// A process has the PID. It is the owner unless its start time
		// says it is another process that reused the PID.
		want := labels[LabelOwnerStart]
		got := processStart(pid)
		if want == "" || got == "" || got == want {
			return "", false
		}
	default:
		return "", false
	}
	run = fmt.Sprintf("the killed run of pid %d", pid)
	if dir := labels[LabelRunDir]; dir != "" {
		run += " (run directory " + dir + ")"
	}
	return run, true
}

// reapOrphans removes the containers, then the networks, of this backend
// whose owner is gone (orphanOwner), and says what it did.
func reapOrphans(ctx context.Context, cli client.APIClient) []string {
	var out []string
	f := make(client.Filters).Add("label", LabelBackend+"=docker")
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return []string{fmt.Sprintf("could not look for containers left by killed runs: %v", err)}
	}
	for _, ct := range list.Items {
		run, orphan := orphanOwner(ct.Labels)
		if !orphan {
			continue
		}
		name := containerLabel(ct.Names, ct.ID)
		if _, err := cli.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			out = append(out, fmt.Sprintf("could not remove container %s left by %s: %v", name, run, err))
			continue
		}
		out = append(out, fmt.Sprintf("removed container %s (state %s) left by %s", name, ct.State, run))
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return append(out, fmt.Sprintf("could not look for networks left by killed runs: %v", err))
	}
	for _, n := range nets.Items {
		run, orphan := orphanOwner(n.Labels)
		if !orphan {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
			out = append(out, fmt.Sprintf("could not remove network %s left by %s: %v", n.Name, run, err))
			continue
		}
		out = append(out, fmt.Sprintf("removed network %s left by %s", n.Name, run))
	}
	return out
}

// tarFile packs one file (absolute path in the container) for
// CopyToContainer to "/".
func tarFile(path string, content []byte) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o644, Size: int64(len(content)), ModTime: time.Now(), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

var inspectOpts = client.ContainerInspectOptions{}
