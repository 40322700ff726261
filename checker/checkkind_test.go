package checker

import (
	"slices"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// toyRefusals is a check of the test's own, plugged in as a new check is:
// its type and one entry in checks. It counts refused acquires, puts the
// count in the results, calls a run with one unsafe and names the
// mechanism in the answers.
type toyRefusals struct{ n int }

const toyCheck = "toy-refusals"

func (t *toyRefusals) called(c *Call) {
	if c.Inv.F == history.Acquire && c.Outcome() == history.Fail {
		t.n++
	}
}

func (t *toyRefusals) result(r *Results) {
	if r.Checks == nil {
		r.Checks = map[string]any{}
	}
	r.Checks[toyCheck] = t.n
}

func toyRefused(r *Results) int {
	n, _ := r.Checks[toyCheck].(int)
	return n
}

var toyKind = checkKind{name: toyCheck,
	new: func(Options) check { return &toyRefusals{} },
	verdict: func(r *Results) string {
		if toyRefused(r) > 0 {
			return VerdictUnsafe
		}
		return ""
	},
	answer: func(r *Results, a *Answers) {
		if n := toyRefused(r); n > 0 {
			a.Mechanisms = append(a.Mechanisms, Mechanism{Kind: toyCheck, Count: n, Says: "an acquire was refused"})
		}
	}}

// TestToyCheckPlugsIn: one entry in checks is all a check needs to be
// fed the hold engine's calls and to add its part to the results, the
// verdict and the answers. The same histories without it are safe.
func TestToyCheckPlugsIn(t *testing.T) {
	safe := func() *hb {
		return new(hb).acquire(0, "k", 0, 10, history.OK, "a", 1000).
			release(0, "k", 20, 25, history.OK, "a").
			acquire(1, "k", 30, 35, history.OK, "b", 1000).
			release(1, "k", 40, 45, history.OK, "b")
	}
	cases := []struct {
		name     string
		plugged  bool
		refused  bool
		verdict  string
		refusals any // Checks[toyCheck]
	}{
		{"plugged, a refusal", true, true, VerdictUnsafe, 1},
		{"plugged, no refusal", true, false, VerdictSafe, 0},
		{"not plugged, a refusal", false, true, VerdictSafe, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.plugged {
				old := checks
				checks = append(slices.Clone(old), toyKind)
				t.Cleanup(func() { checks = old })
			}
			b := safe()
			if c.refused {
				b.acquire(1, "k", 12, 15, history.Fail, "", -1)
			}
			r := Check(b.build(t), Options{})
			if r.Verdict != c.verdict {
				t.Errorf("verdict %s, want %s", r.Verdict, c.verdict)
			}
			if got := r.Checks[toyCheck]; got != c.refusals {
				t.Errorf("results' %s = %v, want %v", toyCheck, got, c.refusals)
			}
			named := r.Answers != nil && slices.ContainsFunc(r.Answers.Mechanisms, func(m Mechanism) bool { return m.Kind == toyCheck })
			if named != (c.verdict == VerdictUnsafe) || (named && r.Answers.Lock != AnswerUnsafe) {
				t.Errorf("answers %+v: the toy's mechanism named %v, want it only when unsafe", r.Answers, named)
			}
		})
	}
}
