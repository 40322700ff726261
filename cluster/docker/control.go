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

	"github.com/lockjepsen/lockjepsen/cluster/local/fakeclock"
)

// The docker cluster is a cluster.Controller.

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
// stream delayed by a latency fault) dies with it, as on a crashed machine.
// loseUnsynced is refused before anything is killed.
func killNode(cli client.APIClient, internal *internalNet, name, containerID string, loseUnsynced bool) error {
	if loseUnsynced {
		return fmt.Errorf("kill %s: %w", name, ErrLoseUnsynced)
	}
	if err := killContainer(cli, name, containerID); err != nil {
		return err
	}
	if internal != nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := internal.drop(ctx, name); err != nil {
			return fmt.Errorf("kill %s: killed, but: %w", name, err)
		}
	}
	return nil
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
	if err := waitReady(ctx, n.addr()); err != nil {
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

// reapOrphans removes the containers and networks this backend created in
// processes of this host that are no longer alive (a harness that was
// killed before Close; Ryuk would do this where it can run).
func reapOrphans(ctx context.Context, e *engine) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	host, _ := os.Hostname()
	dead := func(labels map[string]string) bool {
		h, pid, ok := strings.Cut(labels[LabelOwner], "/")
		if !ok || h != host {
			return false
		}
		p, err := strconv.Atoi(pid)
		if err != nil || p <= 0 || p == os.Getpid() {
			return false
		}
		return errors.Is(syscall.Kill(p, 0), syscall.ESRCH)
	}
	f := make(client.Filters).Add("label", LabelBackend+"=docker")
	list, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err == nil {
		for _, ct := range list.Items {
			if dead(ct.Labels) {
				_, _ = e.cli.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
	nets, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err == nil {
		for _, n := range nets.Items {
			if dead(n.Labels) {
				_, _ = e.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
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
