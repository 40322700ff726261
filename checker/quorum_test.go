package checker

import (
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// quorumInMemory counts the grants by their nodes over the whole slice:
// each ok acquire, paired with its process's pending invoke.
func quorumInMemory(ops []history.Op, opts Options) *QuorumResult {
	if opts.MajorityOf <= 0 {
		return nil
	}
	r := &QuorumResult{Nodes: opts.MajorityOf}
	pending := map[int]string{}
	for _, op := range ops {
		switch {
		case op.Process == history.NemesisProcess || op.Type == history.Background || op.Type == history.Summary:
		case op.Type == history.Invoke:
			pending[op.Process] = op.F
		case pending[op.Process] == history.Acquire && op.Type == history.OK && op.Value != nil && len(op.Value.Nodes) > 0:
			if r.ByNodes == nil {
				r.ByNodes = map[int]int{}
			}
			r.Grants++
			r.ByNodes[len(op.Value.Nodes)]++
			if 2*len(op.Value.Nodes) <= r.Nodes {
				if r.Minority++; r.Example == "" {
					r.Example = "process " + op.String()
				}
			}
		}
	}
	return r
}

// TestMinorityGrants: on five independent nodes a grant needs three. A
// grant by two is counted, and an overlap one of whose holds it granted
// is the lock's minority-grant; an overlap of two majority grants (with
// no fault: no-server-cause) is not.
func TestMinorityGrants(t *testing.T) {
	redlock := Options{MajorityOf: 5}
	cases := []struct {
		name             string
		b                *hb
		opts             Options
		grants, minority int
		cause, storyHas  string
		noQuorum         bool
	}{
		{name: "a grant by 2 of 5 is a minority; the overlap is its",
			b:    new(hb).grantOn(1, "k", 0, 5, "a", "n1", "n3", "n5").grantOn(2, "k", 10, 20, "b", "n2", "n4"),
			opts: redlock, grants: 2, minority: 1, cause: CauseMinorityGrant, storyHas: "granted by n2, n4: 2 of 5 nodes, not a majority"},
		{name: "the earlier hold by a minority",
			b:    new(hb).grantOn(1, "k", 0, 5, "a", "n1", "n2").grantOn(2, "k", 10, 20, "b", "n3", "n4", "n5"),
			opts: redlock, grants: 2, minority: 1, cause: CauseMinorityGrant, storyHas: "process 1's hold of k"},
		{name: "3 of 5 is a majority: the overlap has no server-side cause",
			b:    new(hb).grantOn(1, "k", 0, 5, "a", "n1", "n2", "n3").grantOn(2, "k", 10, 20, "b", "n3", "n4", "n5"),
			opts: redlock, grants: 2, cause: CauseNoServerCause},
		{name: "a grant that names no nodes is not counted",
			b: new(hb).grantOn(1, "k", 0, 5, "a").grantOn(2, "k", 10, 20, "b"), opts: redlock, cause: CauseNoServerCause},
		{name: "without a majority to need, nothing is counted",
			b: new(hb).grantOn(1, "k", 0, 5, "a", "n1").grantOn(2, "k", 10, 20, "b", "n1"), noQuorum: true, cause: CauseNoServerCause},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			r := Check(ops, c.opts)
			q := r.Quorum
			if c.noQuorum != (q == nil) {
				t.Fatalf("quorum %+v", q)
			}
			if q != nil && (q.Grants != c.grants || q.Minority != c.minority) {
				t.Fatalf("quorum %+v, want %d grants, %d by a minority", q, c.grants, c.minority)
			}
			m := quorumInMemory(ops, c.opts)
			if (m == nil) != (q == nil) || (m != nil && (m.Grants != q.Grants || m.Minority != q.Minority)) {
				t.Fatalf("in memory %+v, streamed %+v", m, q)
			}
			if len(r.Answers.Mechanisms) != 1 || r.Answers.Mechanisms[0].Cause != c.cause {
				t.Fatalf("mechanisms %+v, want one of cause %s", r.Answers.Mechanisms, c.cause)
			}
			if s := r.Answers.Mechanisms[0].Example; !strings.Contains(s, c.storyHas) {
				t.Fatalf("example %q lacks %q", s, c.storyHas)
			}
			if c.minority > 0 && !strings.Contains(strings.Join(r.Summary(), "\n"), "fewer than a majority of 3") {
				t.Fatalf("summary:\n%s", strings.Join(r.Summary(), "\n"))
			}
		})
	}
}
