package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/local"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/runfile"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// leakyBackend is the real local backend, whose clusters' Close stops
// every server as always and then also reports what it could not remove,
// as the docker backend's Close does when dockerd refuses a removal. No
// local failure can be made to happen on demand (Close of the local
// backend cannot fail), so the failure is added here.
type leakyBackend struct {
	local.Backend
	failures []error
}

func (b leakyBackend) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	cl, err := b.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return leakyCluster{cl, b.failures}, nil
}

type leakyCluster struct {
	cluster.Cluster
	failures []error
}

func (c leakyCluster) Close(ctx context.Context) error {
	return errors.Join(c.Cluster.Close(ctx), errors.Join(c.failures...))
}

// What the backend could not clean up is kept in run.json, one line per
// failure, and does not change the verdict or make the run fail.
func TestCleanupFailuresAreInRunJSON(t *testing.T) {
	redistest.RequireBinary(t)
	for _, c := range []struct {
		name     string
		failures []error
	}{
		{name: "clean"},
		{name: "two left", failures: []error{
			errors.New("remove container of n1: conflict: removal already in progress"),
			errors.Join(errors.New("sweep: network lockjepsen-x has active endpoints")),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := harnesstest.ShortConfig(t)
			cfg.Backend = leakyBackend{failures: c.failures}
			out, err := harness.Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.Results.HarnessFailed() {
				t.Errorf("harness errors: %v", out.Results.Errors)
			}
			b, err := os.ReadFile(filepath.Join(out.Dir, harness.RunInfoFile))
			if err != nil {
				t.Fatal(err)
			}
			var info runfile.RunInfo
			if err := json.Unmarshal(b, &info); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, e := range c.failures {
				want = append(want, e.Error())
			}
			if !slices.Equal(info.CleanupFailures, want) {
				t.Fatalf("run.json's cleanup_failures %q; want %q\n%s", info.CleanupFailures, want, b)
			}
		})
	}
}
