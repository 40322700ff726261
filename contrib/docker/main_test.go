package docker_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/locks"
)

// TestMain checks, after every test, that this test process left no
// container and no network of the project behind (and removes any it finds,
// so that a failure does not leak them either).
func TestMain(m *testing.M) {
	// go-redis logs every failed dial; under faults that is noise.
	locks.SilenceRedisLogs()
	code := m.Run()
	if engineErr == nil && os.Getenv("LOCKJEPSEN_DOCKER_CHILD") == "" {
		if err := leftovers(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func leftovers() error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil // no engine: nothing can be left
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil
	}
	host, _ := os.Hostname()
	f := make(client.Filters).Add("label", ownerLabel(os.Getpid()))
	var left []string
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return err
	}
	for _, c := range cs.Items {
		left = append(left, "container "+c.ID[:12])
		_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return err
	}
	for _, n := range ns.Items {
		_, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		if staleEndpoint(ctx, cli, n.ID, err) {
			// dockerd's own defect, not a leak of ours: every container
			// is gone and the network still claims an endpoint, which no
			// API call removes; only restarting dockerd does.
			fmt.Fprintf(os.Stderr, "warning: dockerd kept a stale endpoint in network %s after its containers were removed (moby#17217); it cannot be removed without restarting dockerd\n", n.Name)
			continue
		}
		left = append(left, "network "+n.Name)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", docker.LabelOwner)})
	if err != nil {
		return err
	}
	for _, v := range vs.Items {
		if v.Labels[docker.LabelOwner] == fmt.Sprintf("%s/%d", host, os.Getpid()) {
			left = append(left, "volume "+v.Name)
			_, _ = cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{})
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("the tests left %v behind", left)
	}
	return nil
}

// staleEndpoint reports whether removing network id failed only because
// dockerd still counts an endpoint of a container that no longer exists.
func staleEndpoint(ctx context.Context, cli client.APIClient, id string, removeErr error) bool {
	if removeErr == nil || !strings.Contains(removeErr.Error(), "active endpoints") {
		return false
	}
	n, err := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	return err == nil && len(n.Network.Containers) == 0
}

// dockerClient is a plain Engine API client for the tests' own queries.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// labelled lists the containers (with their state) and networks that
// carry a label, as "container NAME (STATE)" and "network NAME".
func labelled(ctx context.Context, cli client.APIClient, label string) ([]string, error) {
	f := make(client.Filters).Add("label", label)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cs.Items {
		out = append(out, fmt.Sprintf("container %s (%s)", strings.TrimPrefix(c.Names[0], "/"), c.State))
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, err
	}
	for _, n := range ns.Items {
		out = append(out, "network "+n.Name)
	}
	return out, nil
}

func ownerLabel(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s=%s/%d", docker.LabelOwner, host, pid)
}

// waitLabelled lists what carries label every `every` until ready accepts
// the list, and returns it with true; once startDeadline has passed, it
// returns the last list with false. Before each listing, stop is called
// with the last one: it fails the test if the run being watched ended
// before it got there.
func waitLabelled(t *testing.T, cli client.APIClient, label string, every time.Duration, stop func(have []string), ready func(have []string) bool) ([]string, bool) {
	t.Helper()
	deadline := time.Now().Add(startDeadline)
	var have []string
	for {
		stop(have)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		have, err = labelled(ctx, cli, label)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ready(have) {
			return have, true
		}
		if time.Now().After(deadline) {
			return have, false
		}
		time.Sleep(every)
	}
}

// requireNoneLabelled waits up to d until nothing carries label; what
// names that state in the failure.
func requireNoneLabelled(t *testing.T, cli client.APIClient, d time.Duration, what, label string) {
	t.Helper()
	until(t, d, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		left, err := labelled(ctx, cli, label)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("still there: %v", left)
		}
		return nil
	})
}
