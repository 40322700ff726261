package docker_test

import (
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/contrib/docker"
	"github.com/lockjepsen/lockjepsen/contrib/liblocks"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

// TestContainerBackendsRefuseWhatTheyCannotRun: the harness asks the
// backend (cluster.Fitter), not a list of backend names, and refuses what
// it cannot run as bad usage before anything starts; what it can run
// passes. No Docker engine is needed.
func TestContainerBackendsRefuseWhatTheyCannotRun(t *testing.T) {
	if err := liblocks.Register(); err != nil { // the etcd lock
		t.Fatal(err)
	}
	for _, backend := range []cluster.Backend{docker.Backend{}, docker.ComposeBackend{}} {
		for _, c := range []struct {
			system, lock string
			nodes        int
			nemesis      []string
			want         string // "" when the configuration is valid
		}{
			{cluster.Etcd, "etcd", 3, nil, "etcd runs on the local backend"},
			{cluster.RedisCluster, "token", 6, []string{nemesis.Isolate}, map[string]string{"docker": "cannot isolate a node", "compose": "not on compose"}[backend.Name()]},
			{cluster.RedisCluster, "token", 6, []string{nemesis.Kill}, map[string]string{"compose": "not on compose"}[backend.Name()]},
			{cluster.Sentinel, "token", 3, []string{nemesis.Isolate}, ""},
		} {
			cfg := harness.DefaultConfig()
			cfg.Backend, cfg.Store = backend, t.TempDir()
			cfg.System, cfg.Lock, cfg.Nodes, cfg.Nemesis = c.system, c.lock, c.nodes, c.nemesis
			cfg.TTL = harness.DefaultTTL(c.system)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s: %s %v: refused: %v", backend.Name(), c.system, c.nemesis, err)
			case c.want != "" && (!harness.IsUsage(err) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s: %s %v: got %v, want a usage error with %q", backend.Name(), c.system, c.nemesis, err, c.want)
			}
		}
	}
}
