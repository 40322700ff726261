package nemesis

import (
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
)

// TestScriptsPlaceCutsBeforeTheGrantTheyWaitFor: a step that waits for a
// grant (AfterGrant) and starts with earlier steps (the cuts and slowed
// links the threat needs) is held back until each of them is in place.
// Steps at one time start side by side, so a grant could otherwise come
// before a cut, reach the replica, and take the threat away.
func TestScriptsPlaceCutsBeforeTheGrantTheyWaitFor(t *testing.T) {
	params := []ScriptParams{
		{System: cluster.Sentinel, Nodes: []string{"n1", "n2", "n3"}, Sentinels: []string{"s1", "s2", "s3"}},
		{System: cluster.RedisCluster, Nodes: []string{"n1", "n2", "n3", "n4", "n5", "n6"}},
		{System: cluster.Redlock, Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, ClockJump: time.Second},
	}
	for _, name := range ScriptNames() {
		script := Scripts[name]
		var steps []Step
		for _, p := range params {
			p.Clients, p.TTL, p.TimeLimit = 4, 10*time.Second, 45*time.Second
			p.Interval, p.Duration = time.Second, time.Second
			if script.Check(p) == nil {
				steps = script.Build(p)
				break
			}
		}
		if len(steps) == 0 {
			t.Fatalf("%s: no parameters here that it takes", name)
		}
		for i, st := range steps {
			if !st.Action.AfterGrant {
				continue
			}
			// Back from i to the first step that starts with it: each one
			// from there must wait for the one before.
			for j := i; j > 0 && steps[j-1].At == st.At; j-- {
				if !steps[j].AfterPrevious {
					t.Errorf("%s: step %d (%s, waiting for a grant) starts with step %d (%s) at %s, but step %d is not held back until step %d is in place",
						name, i, st.Action.Fault, j-1, steps[j-1].Action.Fault, st.At, j, j-1)
				}
			}
		}
	}
}
