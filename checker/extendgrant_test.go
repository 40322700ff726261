package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// egInMemory is the extend-over-grant check over the whole history, with
// no pruning: every ok extend against every ok grant, each pair judged at
// the later answer, against the releases and faults seen by then. The
// stream must give the same result.
func egInMemory(ops []history.Op, opts Options) *ExtendGrantResult {
	w := NewExtendGrantWatcher(opts)
	w.keep = true
	for _, op := range ops {
		w.Observe(op)
	}
	return w.st.result()
}

// grantOn adds an ok acquire with a 1000 ms TTL, valid for 990 ms from
// its invoke, granted by nodes.
func (b *hb) grantOn(p int, key string, inv, comp int64, token string, nodes ...string) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, key, &history.Value{TTL: ms(1000)})
	return b.ev(comp, p, history.OK, history.Acquire, key, &history.Value{Token: token, ValidUntil: vu(inv + 990), Nodes: nodes})
}

// TestExtendOverGrant: process 1 holds k (token a, granted at 5) and
// extends it at ei with a 1000 ms TTL; process 2 is granted k (token b)
// between. The pair has no valid order when bc − ei < 1000 − 10 ms.
func TestExtendOverGrant(t *testing.T) {
	// A's grant, then its extend sent at 900 (just before its validity),
	// answered ok at 1100.
	base := func() *hb {
		return new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 900, 1100, ok, "a", 1890)
	}
	cases := []struct {
		name  string
		b     *hb
		opts  Options
		found int
		pairs int
	}{
		{name: "a grant inside the extend (the GET-then-PEXPIRE race) is flagged",
			b: base().grantOn(2, "k", 996, 1050, "b"), found: 1, pairs: 1},
		{name: "bc − ei just below T − tolerance is flagged",
			b: new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 100, 200, ok, "a", 1090).grantOn(2, "k", 1000, 1089, "b"), found: 1, pairs: 1},
		{name: "bc − ei at T − tolerance is not: the key may have expired",
			b: new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 100, 200, ok, "a", 1090).grantOn(2, "k", 1000, 1090, "b"), pairs: 1},
		{name: "bc − ei above T is not paired",
			b: new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 100, 200, ok, "a", 1090).grantOn(2, "k", 1000, 1150, "b")},
		{name: "an extend sent after the grant is flagged (case e > g)",
			b: new(hb).grantOn(1, "k", 0, 5, "a").grantOn(2, "k", 995, 1000, "b").extend(1, "k", 1001, 1010, ok, "a", 1990), found: 1, pairs: 1},
		{name: "a grant answered before the extend is flagged too",
			b: new(hb).grantOn(1, "k", 0, 5, "a").ev(900, 1, history.Invoke, history.Extend, "k", &history.Value{Token: "a", TTL: ms(1000)}).
				grantOn(2, "k", 995, 1000, "b").ev(1100, 1, history.OK, history.Extend, "k", &history.Value{ValidUntil: vu(1890)}), found: 1, pairs: 1},
		{name: "a failed extend is what a correct lock says",
			b: new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 900, 1100, fail, "a", 0).grantOn(2, "k", 996, 1050, "b")},
		{name: "an extend with an unknown outcome is never judged",
			b: new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 900, 1100, history.Info, "a", 0).grantOn(2, "k", 996, 1050, "b")},
		{name: "an extend never answered is never judged",
			b: new(hb).grantOn(1, "k", 0, 5, "a").extend(1, "k", 900, -1, ok, "a", 0).grantOn(2, "k", 996, 1050, "b")},
		{name: "A's release invoked before the grant was answered may have deleted the key",
			b: base().release(1, "k", 1101, 1102, ok, "a").grantOn(2, "k", 1000, 1103, "b"), pairs: 1},
		{name: "A's release invoked after the grant was answered deletes nothing in time",
			b: base().grantOn(2, "k", 996, 1050, "b").release(1, "k", 1101, 1102, ok, "a"), found: 1, pairs: 1},
		{name: "a failed release deleted nothing",
			b: base().release(1, "k", 1101, 1102, fail, "a").grantOn(2, "k", 1000, 1103, "b"), found: 1, pairs: 1},
		{name: "a release still unanswered when the grant is may have deleted the key",
			b: base().release(3, "k", 1000, 1200, fail, "c").grantOn(2, "k", 996, 1150, "b"), pairs: 1},
		{name: "another client's release before the grant may have deleted the key (its own finding)",
			b: base().release(3, "k", 1000, 1010, ok, "c").grantOn(2, "k", 996, 1050, "b"), pairs: 1},
		{name: "a release answered before A's acquire deleted nothing of A's",
			b: new(hb).release(3, "k", 0, 1, ok, "c").grantOn(1, "k", 2, 5, "a").extend(1, "k", 900, 1100, ok, "a", 1890).grantOn(2, "k", 996, 1050, "b"), found: 1, pairs: 1},
		{name: "grants by disjoint nodes (two primaries) are not judged",
			b: new(hb).grantOn(1, "k", 0, 5, "a", "n1").extend(1, "k", 900, 1100, ok, "a", 1890).grantOn(2, "k", 996, 1050, "b", "n2"), pairs: 1},
		{name: "grants by one node are judged",
			b: new(hb).grantOn(1, "k", 0, 5, "a", "n1").extend(1, "k", 900, 1100, ok, "a", 1890).grantOn(2, "k", 996, 1050, "b", "n1"), found: 1, pairs: 1},
		{name: "Redlock: two majorities intersect",
			b:    new(hb).grantOn(1, "k", 0, 5, "a", "n1", "n2", "n3").extend(1, "k", 900, 1100, ok, "a", 1890).grantOn(2, "k", 996, 1050, "b", "n3", "n4", "n5"),
			opts: Options{MajorityOf: 5}, found: 1, pairs: 1},
		{name: "Redlock: a minority grant is its own finding",
			b:    new(hb).grantOn(1, "k", 0, 5, "a", "n1", "n2", "n3").extend(1, "k", 900, 1100, ok, "a", 1890).grantOn(2, "k", 996, 1050, "b", "n3", "n4"),
			opts: Options{MajorityOf: 5}, pairs: 1},
		{name: "a key-loss fault meanwhile may have taken the key",
			b:    base().fault(500, "kill", "start", "n1").fault(520, "kill", "stop", "n1").grantOn(2, "k", 996, 1050, "b"),
			opts: Options{KeyLossFaults: []string{"kill"}}, pairs: 1},
		{name: "a fault that takes no key excuses nothing",
			b:    base().fault(500, "latency", "start", "n1").grantOn(2, "k", 996, 1050, "b"),
			opts: Options{KeyLossFaults: []string{"kill"}}, found: 1, pairs: 1},
		{name: "a key-loss fault before A's acquire excuses nothing",
			b: new(hb).fault(0, "kill", "start", "n1").fault(1, "kill", "stop", "n1").grantOn(1, "k", 2, 5, "a").
				extend(1, "k", 900, 1100, ok, "a", 1890).grantOn(2, "k", 996, 1050, "b"),
			opts: Options{KeyLossFaults: []string{"kill"}}, found: 1, pairs: 1},
		{name: "servers that renew leases excuse every pair",
			b: base().grantOn(2, "k", 996, 1050, "b"), opts: Options{ServerRenewsLeases: "etcd"}, pairs: 1},
		{name: "a grant asked for before A's grant was answered is not paired",
			b: new(hb).grantOn(1, "k", 0, 5, "a").ev(4, 2, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(1000)}).
				extend(1, "k", 900, 1100, ok, "a", 1890).ev(1050, 2, history.OK, history.Acquire, "k", &history.Value{Token: "b"})},
		{name: "one token on both grants is the shared-token finding",
			b: base().grantOn(2, "k", 996, 1050, "a")},
		{name: "another key is another lock",
			b: base().grantOn(2, "j", 996, 1050, "b")},
		{name: "two grants inside one extend flag it once",
			b: base().grantOn(2, "k", 996, 1050, "b").grantOn(3, "k", 996, 1060, "c"), found: 1, pairs: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := c.b.build(t)
			r := Check(ops, c.opts)
			eg := r.ExtendGrants
			if eg.Count != c.found || eg.Pairs != c.pairs {
				t.Fatalf("found %d in %d pairs, want %d in %d: %+v", eg.Count, eg.Pairs, c.found, c.pairs, eg)
			}
			if m := egInMemory(ops, c.opts); !slices.EqualFunc([]*ExtendGrantResult{m}, []*ExtendGrantResult{eg}, sameEg) {
				t.Fatalf("in memory %+v, streamed %+v", m, eg)
			}
			if c.found == 0 {
				return
			}
			if r.Verdict != VerdictUnsafe || r.Answers.Lock != AnswerUnsafe {
				t.Fatalf("verdict %s, lock %s: a dishonest extend is the lock's", r.Verdict, r.Answers.Lock)
			}
			i := slices.IndexFunc(r.Answers.Mechanisms, func(m Mechanism) bool { return m.Cause == CauseGrantInsideExtend })
			if i < 0 || r.Answers.Mechanisms[i].Kind != MechDishonestExtend {
				t.Fatalf("mechanisms %+v", r.Answers.Mechanisms)
			}
			if s := eg.Examples[0].Story; !strings.Contains(s, "an extend answered ok while process 2's grant fell inside it") {
				t.Fatalf("story %q", s)
			}
		})
	}
}

func sameEg(a, b *ExtendGrantResult) bool {
	if a.Pairs != b.Pairs || a.Excused != b.Excused || a.Count != b.Count || len(a.Examples) != len(b.Examples) {
		return false
	}
	for i := range a.Examples {
		if a.Examples[i].Story != b.Examples[i].Story {
			return false
		}
	}
	return true
}
