package docker

import (
	"fmt"
	"slices"
	"strings"

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
	if spec.Descriptor().Reach == cluster.ReachSlots {
		return fmt.Errorf("--system %s runs on the local and docker backends, not on compose", spec.System)
	}
	return fitContainers(b.Name(), spec)
}

func fitContainers(backend string, spec cluster.Spec) error {
	d := spec.Descriptor()
	switch {
	case d.Server != cluster.ServerRedis:
		return fmt.Errorf("the %s backend runs the %s systems; %s runs on the local backend",
			backend, andList(redisSystems()), spec.System)
	case d.Reach == cluster.ReachSlots && slices.Contains(spec.Faults, nemesis.Isolate):
		return fmt.Errorf("--system %s cannot isolate a node here: the toxiproxy container cuts the cluster's links only on their way into a node, "+
			"and a Redis Cluster node that still reaches its peers hears at once that its replica took over; isolate it on --backend local", spec.System)
	}
	return nil
}

// redisSystems are the systems whose nodes run redis-server: the ones
// the container images hold.
func redisSystems() []string {
	var names []string
	for _, d := range cluster.AllSystems() {
		if d.Server == cluster.ServerRedis {
			names = append(names, d.Name)
		}
	}
	return names
}

// andList joins names as "a, b, c and d".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
