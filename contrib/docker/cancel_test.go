package docker_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
)

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
			seen, ok := waitLabelled(t, cli, docker.LabelRunDir+"="+dir, 20*time.Millisecond, func(seen []string) {
				select {
				case r := <-done:
					if r.cl != nil {
						r.cl.Close(context.Background())
					}
					t.Fatalf("Start returned before the point to cancel at (containers %v): %v", seen, r.err)
				default:
				}
			}, func(seen []string) bool {
				var cs []string
				for _, s := range seen {
					if strings.HasPrefix(s, "container ") {
						cs = append(cs, s)
					}
				}
				return tc.ready(cs)
			})
			if !ok {
				cancel()
				<-done
				t.Fatalf("the point to cancel at not reached after %v: the run has %v", startDeadline, seen)
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
			requireNoneLabelled(t, cli, 30*time.Second, "nothing left with this process's owner label", ownerLabel(os.Getpid()))
		})
	}
}
