package checker

import (
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// fencesInMemory judges the fences over the whole slice: every grant in
// grant order, against the faults and primaries seen by then.
func fencesInMemory(ops []history.Op, opts Options) *FenceAnswer {
	fs := newFenceState(opts)
	var faults []*Fault
	var primaries []Primary
	open := FaultPairer{Meanings: opts.Faults}
	tr := Tracker[struct{}]{OnGrant: func(h *Belief[struct{}]) { fs.grant(&h.Hold, faults, primaries) }}
	for i := range ops {
		op := &ops[i]
		if op.Process == history.NemesisProcess {
			if f, _ := open.Apply(op); f != nil && opts.restores(f.Name) {
				faults = append(faults, f)
			}
			if op.F == PrimaryEvent && op.Value != nil && op.Value.Phase == "start" && len(op.Value.Targets) > 0 {
				primaries = append(primaries, Primary{Node: op.Value.Targets[0], Start: op.Time})
			}
		}
		if op.Type != history.Background {
			tr.Observe(op)
		}
	}
	return fs.result()
}

// fenced adds an ok acquire by p with fence f, granted by nodes.
func (b *hb) fenced(p int, key string, inv, comp int64, token string, f int64, nodes ...string) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, key, &history.Value{TTL: ms(1000)})
	return b.ev(comp, p, history.OK, history.Acquire, key, &history.Value{Token: token, Fence: history.I64(f), ValidUntil: vu(inv + 990), Nodes: nodes})
}

// TestFenceRegressions: a fence not above an earlier one is the lock's,
// unless a key-losing fault on the grants' node or a failover between the
// grants could have reset the counter.
func TestFenceRegressions(t *testing.T) {
	loss := Options{KeyLossFaults: []string{"kill"}}
	grants := func() *hb {
		return new(hb).fenced(1, "k", 0, 5, "a", 7, "n1").release(1, "k", 100, 105, ok, "a")
	}
	cases := []struct {
		name       string
		b          *hb
		lock, dep  int
		exampleHas string
	}{
		{name: "a fence that grew", b: grants().fenced(2, "k", 200, 205, "b", 8, "n1")},
		{name: "a fence that did not grow, nothing to reset it: the lock's",
			b: grants().fenced(2, "k", 200, 205, "b", 7, "n1"), lock: 1, exampleHas: "did not grow"},
		{name: "a kill on the node between the grants: the deployment's",
			b: grants().fault(150, "kill", "start", "n1").fault(160, "kill", "stop", "n1").fenced(2, "k", 200, 205, "b", 1, "n1"), dep: 1, exampleHas: "kill"},
		{name: "a kill on another node excuses nothing",
			b: grants().fault(150, "kill", "start", "n2").fault(160, "kill", "stop", "n2").fenced(2, "k", 200, 205, "b", 1, "n1"), lock: 1},
		{name: "a kill before the first grant excuses nothing",
			b: new(hb).fault(0, "kill", "start", "n1").fault(2, "kill", "stop", "n1").fenced(1, "k", 3, 5, "a", 7, "n1").
				release(1, "k", 100, 105, ok, "a").fenced(2, "k", 200, 205, "b", 1, "n1"), lock: 1},
		{name: "a failover between the grants: the deployment's",
			b: new(hb).fault(0, PrimaryEvent, "start", "n1").fenced(1, "k", 1, 5, "a", 7, "n1").release(1, "k", 100, 105, ok, "a").
				fault(150, PrimaryEvent, "start", "n2").fenced(2, "k", 200, 205, "b", 3, "n2"), dep: 1, exampleHas: "failover to n2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			r := Check(ops, loss)
			f := r.Fences
			if f == nil || f.Lock != c.lock || f.Deployment != c.dep {
				t.Fatalf("fences %+v, want %d the lock's, %d the deployment's", f, c.lock, c.dep)
			}
			if m := fencesInMemory(ops, loss); *m != *f {
				t.Fatalf("in memory %+v, streamed %+v", m, f)
			}
			lockMech, lossMech := fenceMechanisms(f)
			if (len(lockMech) > 0) != (c.lock > 0) || (len(lossMech) > 0) != (c.dep > 0) {
				t.Fatalf("mechanisms %+v, losses %+v", lockMech, lossMech)
			}
			if c.lock > 0 && r.Answers.Lock != AnswerUnsafe || c.dep > 0 && r.Answers.Deployment != AnswerUnsafe {
				t.Fatalf("answers %+v", r.Answers)
			}
			if c.exampleHas != "" && !strings.Contains(f.LockExample+f.DeploymentExample, c.exampleHas) {
				t.Fatalf("examples %q %q lack %q", f.LockExample, f.DeploymentExample, c.exampleHas)
			}
		})
	}
}
