package nemesis

import (
	"context"
	"fmt"

	"github.com/lockjepsen/lockjepsen/cluster"
)

var failoverDescriptors = []Descriptor{
	{Name: Failover, Description: "the sentinels are asked for a manual failover (SENTINEL FAILOVER)",
		Kind: KindServer, FailsOver: true, Systems: systemsWhere(cluster.System.HasSentinels), SystemsWhy: "asks the sentinels for a failover",
		Exercises: []string{momentFailovers, momentNodeFaults},
		Draw:      Draw{Class: classOther},
		new:       func(*ClientFaults) (Fault, error) { return failoverFault{}, nil }},
}

// failoverFault asks the sentinels for a manual failover.
type failoverFault struct{}

func (failoverFault) Name() string { return Failover }

func (failoverFault) Describe(*Action) string { return "SENTINEL FAILOVER" }

func (failoverFault) Available(env *Env, a *Action) error {
	if env.ManualFailover == nil {
		return fmt.Errorf("failover needs the sentinel system")
	}
	return nil
}

func (failoverFault) Start(ctx context.Context, env *Env, a *Action) error {
	_, err := env.ManualFailover(ctx)
	return err
}

func (failoverFault) Stop(ctx context.Context, env *Env, a *Action) error { return nil }
func (failoverFault) Heal(ctx context.Context, env *Env) error            { return nil }
