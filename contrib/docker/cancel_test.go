package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
)

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

// Ctrl-C while a sentinel cluster starts: Start removes everything it had
// created (containers in any state, the network, the toxiproxy server)
// and returns an error that wraps context.Canceled, without logs. The
// cancel comes at two points of the start, each found by polling the
// Docker API for this run's containers (by their run-directory label):
// as soon as the first container exists (the toxiproxy server, possibly
// still in the created state), and once the sentinels exist (the start is
// waiting for them to agree).
//
// Not parallel: while it runs no other test of this process creates
// containers, so "nothing with this process's owner label is left" is
// exact.
func TestStartCancelledRemovesEverything(t *testing.T) {
	requireDocker(t)
	cli := dockerClient(t)
	for _, tc := range []struct {
		name string
		// ready says whether the run has reached the point to cancel at,
		// from its containers.
		ready func(cs []string) bool
	}{
		{"when the first container exists", func(cs []string) bool { return len(cs) > 0 }},
		{"while the sentinels start", func(cs []string) bool {
			for _, c := range cs {
				if strings.Contains(c, "-s1 ") {
					return true
				}
			}
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				cl  cluster.Cluster
				err error
			}
			done := make(chan result, 1)
			go func() {
				cl, err := docker.Backend{}.Start(ctx, cluster.Spec{System: cluster.Sentinel, Nodes: 3, Dir: dir, Persistence: cluster.PersistNone})
				done <- result{cl, err}
			}()
			run := docker.LabelRunDir + "=" + dir
			deadline := time.Now().Add(startDeadline)
			var seen []string
			for {
				select {
				case r := <-done:
					if r.cl != nil {
						r.cl.Close(context.Background())
					}
					t.Fatalf("Start returned before the point to cancel at (containers %v): %v", seen, r.err)
				default:
				}
				lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
				var err error
				seen, err = labelled(lctx, cli, run)
				lcancel()
				if err != nil {
					t.Fatal(err)
				}
				var cs []string
				for _, s := range seen {
					if strings.HasPrefix(s, "container ") {
						cs = append(cs, s)
					}
				}
				if tc.ready(cs) {
					break
				}
				if time.Now().After(deadline) {
					cancel()
					<-done
					t.Fatalf("the point to cancel at not reached after %v: the run has %v", startDeadline, seen)
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			cancelled := time.Now()
			t.Logf("cancelled with %v", seen)
			var r result
			select {
			case r = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("Start has not returned 2m after its context was cancelled")
			}
			t.Logf("Start returned %v after the cancel: %v", time.Since(cancelled).Round(time.Millisecond), r.err)
			if r.cl != nil {
				r.cl.Close(context.Background())
				t.Fatal("a cancelled Start returned a cluster")
			}
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Start: %v, want an error that wraps context.Canceled", r.err)
			}
			if strings.Contains(r.err.Error(), "--- log of") {
				t.Errorf("a cancelled start dumped logs: %v", r.err)
			}
			until(t, 30*time.Second, "nothing left with this process's owner label", func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				left, err := labelled(ctx, cli, ownerLabel(os.Getpid()))
				if err != nil {
					return err
				}
				if len(left) > 0 {
					return fmt.Errorf("still there: %v", left)
				}
				return nil
			})
		})
	}
}
