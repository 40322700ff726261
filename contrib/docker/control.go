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

	"github.com/lockjepsen/lockjepsen/cluster/fakeclock"
)

// opTimeout bounds one Docker API call of the nemesis.
const opTimeout = 15 * time.Second

// ErrLoseUnsynced is returned by Kill with loseUnsynced: the container's
// append-only file lives in its writable layer, and cutting its tail from
// outside is not supported.
var ErrLoseUnsynced = errors.New("the docker backend cannot drop unsynced append-only-file writes on kill (lose-unsynced); use the local backend for that fault")

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

// apiCall makes one Docker API call of the nemesis, bounded by opTimeout
// within ctx; its error says what was done (what) to which node.
func apiCall(ctx context.Context, what, name string, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := call(ctx); err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	return nil
}

func pauseContainer(cli client.APIClient, name, id string) error {
	return apiCall(context.Background(), "pause", name, func(ctx context.Context) error {
		_, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		return err
	})
}

func unpauseContainer(cli client.APIClient, name, id string) error {
	return apiCall(context.Background(), "resume", name, func(ctx context.Context) error {
		_, err := cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		return err
	})
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
	return apiCall(ctx, "restart", name, func(ctx context.Context) error {
		_, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
		return err
	})
}

func setClock(cli client.APIClient, name, id string, offset time.Duration) error {
	if err := fakeclock.Validate(offset, 1); err != nil {
		return fmt.Errorf("set clock of %s: %w", name, err)
	}
	// The daemon replaces the file (unlink, create, one small write): a
	// clock read in between sees no file, which libfaketime takes as real
	// time for that read, never a partial line.
	content := []byte(fakeclock.Offset(offset, 1) + "\n")
	tarball, err := tarFile(ClockFile, content)
	if err != nil {
		return err
	}
	return apiCall(context.Background(), "set clock of", name, func(ctx context.Context) error {
		_, err := cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: "/", Content: tarball})
		return err
	})
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
