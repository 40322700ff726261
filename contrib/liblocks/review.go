package liblocks

import (
	"fmt"
	"strings"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/scenario"
)

// EtcdBaseline is the review's consensus baseline: the same threat on
// three etcd members with etcd's own lock (a lease, and the key's revision
// as its fence), where Redis's replication loses writes that raft keeps.
var EtcdBaseline = review.Mitigation{
	Name:      "etcd",
	Title:     "the etcd baseline (raft, " + EtcdName + " lock)",
	SwapsLock: true,
	Apply: func(c *harness.Config, t review.Threat, _ review.Measured) (string, error) {
		if len(c.Client) > 0 {
			return "", &review.NotApplicable{Why: "your client speaks to Redis; the etcd baseline runs the harness's etcd lock instead"}
		}
		if d, err := cluster.LookupSystem(c.System); err == nil && d.Server == cluster.ServerEtcd {
			return "", &review.NotApplicable{Why: "the system is etcd already"}
		}
		if !t.AppliesTo(cluster.Etcd) && !t.Analog {
			// Clock faults: etcd's leases run on monotonic timers, which
			// no wall-clock fault reaches, and the harness refuses them.
			return "", &review.NotApplicable{Why: fmt.Sprintf("%s does not reach etcd: its leases run on monotonic timers", short(t.Name))}
		}
		if err := review.SwitchSystem(c, t, scenario.Etcd(EtcdName)); err != nil {
			return "", err
		}
		return fmt.Sprintf("three etcd members, the %s lock (its key's revision is the fence), TTL %s (whole seconds)", EtcdName, c.TTL), nil
	},
}

func short(name string) string { return strings.ReplaceAll(name, "-", " ") }
