package checker

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

func (b *hb) grantBy(p int, key string, inv, comp int64, token string, vuMs int64, node string, fence int64) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, key, &history.Value{TTL: ms(1000)})
	v := &history.Value{Token: token, ValidUntil: vu(vuMs), Nodes: []string{node}}
	if fence > 0 {
		v.Fence = history.I64(fence)
	}
	return b.ev(comp, p, history.OK, history.Acquire, key, v)
}

func (b *hb) primary(t int64, node string) *hb { return b.primaryOf(t, "", node) }

// primaryOf is a primary event about key's slot (Redis Cluster).
func (b *hb) primaryOf(t int64, key, node string) *hb {
	return b.ev(t, history.NemesisProcess, history.Info, PrimaryEvent, key, &history.Value{Phase: "start", Targets: []string{node}})
}

func TestFailover(t *testing.T) {
	cases := []struct {
		name                      string
		b                         *hb
		failovers, stranded, lost int
		regressions, deposed      int
	}{
		{"no failover", new(hb).primary(0, "n1").grantBy(0, "k", 10, 11, "a", 500, "n1", 0), 0, 0, 0, 0, 0},
		{"a hold released before the failover is not stranded",
			new(hb).primary(0, "n1").grantBy(0, "k", 10, 11, "a", 500, "n1", 0).release(0, "k", 100, 101, ok, "a").primary(300, "n2"),
			1, 0, 0, 0, 0},
		{"stranded but nobody took it",
			new(hb).primary(0, "n1").grantBy(0, "k", 10, 11, "a", 2000, "n1", 0).primary(300, "n2"),
			1, 1, 0, 0, 0},
		{"a deposed primary still grants",
			new(hb).primary(0, "n1").primary(300, "n2").grantBy(0, "k", 400, 401, "a", 900, "n1", 0),
			1, 0, 0, 0, 1},
		// Redis Cluster: the events follow the primary of k's slot; j
		// lives in another slot, served by another primary.
		{"a slot's old primary still grants its key",
			new(hb).primaryOf(0, "k", "n1").primaryOf(300, "k", "n4").grantBy(0, "k", 400, 401, "a", 900, "n1", 0),
			1, 0, 0, 0, 1},
		{"another slot's primary is not deposed",
			new(hb).primaryOf(0, "k", "n1").primaryOf(300, "k", "n4").grantBy(0, "j", 400, 401, "a", 900, "n2", 0),
			1, 0, 0, 0, 0},
		{"another slot's hold is not stranded",
			new(hb).primaryOf(0, "k", "n1").grantBy(0, "j", 10, 11, "a", 2000, "n2", 0).primaryOf(300, "k", "n4"),
			1, 0, 0, 0, 0},
		{"lost: a grant by the new primary overlaps, and the fence went backwards",
			new(hb).primary(0, "n1").grantBy(0, "k", 10, 11, "a", 2000, "n1", 8).primary(300, "n2").
				grantBy(1, "k", 400, 401, "b", 2400, "n2", 7),
			1, 1, 1, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.b.build(t)
			_, sr := streamAll(t, ops, Options{})
			for path, r := range map[string]*FailoverResult{"in memory": Failovers(ops), "streamed": sr.Failover} {
				if r.Failovers != tc.failovers || r.Stranded != tc.stranded || r.Lost != tc.lost ||
					r.FenceRegressions != tc.regressions || r.Deposed != tc.deposed {
					t.Fatalf("%s: failovers %d stranded %d lost %d regressions %d deposed %d", path,
						r.Failovers, r.Stranded, r.Lost, r.FenceRegressions, r.Deposed)
				}
				if tc.lost > 0 && r.StrandedHolds[0].Story == "" {
					t.Fatalf("%s: no story", path)
				}
			}
		})
	}
}
