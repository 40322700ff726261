package docker

import (
	"fmt"
	"slices"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/nemesis"
)

var (
	_ cluster.Fitter = Backend{}
	_ cluster.Fitter = ComposeBackend{}
)

// Fit refuses, before anything starts, what the container backends
// cannot run: etcd, and isolating a Redis Cluster node.
func (b Backend) Fit(spec cluster.Spec) error { return fitContainers(b.Name(), spec) }

// Fit refuses what the container backends cannot run (see Backend.Fit),
// and Redis Cluster, which the compose setup does not deploy; whether the
// deployment has the system, Start checks against the topology file.
func (b ComposeBackend) Fit(spec cluster.Spec) error {
	if spec.System == cluster.RedisCluster {
		return fmt.Errorf("--system %s runs on the local and docker backends, not on compose", cluster.RedisCluster)
	}
	return fitContainers(b.Name(), spec)
}

func fitContainers(backend string, spec cluster.Spec) error {
	switch {
	case spec.System == cluster.Etcd:
		return fmt.Errorf("the %s backend runs the %s, %s, %s and %s systems; %s runs on the local backend",
			backend, cluster.Single, cluster.Sentinel, cluster.Redlock, cluster.RedisCluster, cluster.Etcd)
	case spec.System == cluster.RedisCluster && slices.Contains(spec.Faults, nemesis.Isolate):
		return fmt.Errorf("--system %s cannot isolate a node here: the toxiproxy container cuts the cluster's links only on their way into a node, "+
			"and a Redis Cluster node that still reaches its peers hears at once that its replica took over; isolate it on --backend local", cluster.RedisCluster)
	}
	return nil
}
