package harness

import (
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/history"
)

// Where a run told to stop at its first violation stops, event by event:
// at the first overlap, or at the first resource damage when no overlap
// came first; with a grace after an overlap, at the earlier holder's
// end or at the resource's refusal of its stale write, whichever first.
func TestFirstStop(t *testing.T) {
	var idx int64
	ev := func(p int, typ history.Type, f, key string, v *history.Value) history.Op {
		idx++
		return history.Op{Index: idx - 1, Time: idx * 1000, Process: p, Type: typ, F: f, Key: key, Value: v}
	}
	grant := func(p int, token string) []history.Op {
		return []history.Op{ev(p, history.Invoke, history.Acquire, "k", &history.Value{TTL: 1e9}),
			ev(p, history.OK, history.Acquire, "k", &history.Value{Token: token, ValidUntil: history.I64(1e9)})}
	}
	write := func(p int, typ history.Type, n int64, fence *int64) []history.Op {
		return []history.Op{ev(p, history.Invoke, history.Write, "k", &history.Value{N: &n, Fence: fence}),
			ev(p, typ, history.Write, "k", nil)}
	}
	release := func(p int, token string) []history.Op {
		return []history.Op{ev(p, history.Invoke, history.Release, "k", &history.Value{Token: token}),
			ev(p, history.OK, history.Release, "k", nil)}
	}
	cat := func(parts ...[]history.Op) []history.Op {
		var ops []history.Op
		for _, p := range parts {
			ops = append(ops, p...)
		}
		idx = 0
		return ops
	}
	cases := []struct {
		name   string
		grace  bool
		ops    []history.Op
		at     int64 // the event it stops at, -1 for none
		by     string
		reason string
	}{
		{"holds in turn, increments in turn", false, cat(grant(1, "a"), write(1, history.OK, 1, nil), release(1, "a"),
			grant(2, "b"), write(2, history.OK, 2, nil), release(2, "b")), -1, "", ""},
		// Process 1's belief ended at its release; its write after it
		// repeats the value process 2 wrote: a lost update, no overlap.
		{"a write after the lease repeats a value", false, cat(grant(1, "a"), release(1, "a"),
			grant(2, "b"), write(2, history.OK, 1, nil), write(1, history.OK, 1, nil)), 9, checker.DamageLostUpdate, "lost update"},
		{"a stale write refused", false, cat(grant(1, "a"), release(1, "a"),
			grant(2, "b"), write(2, history.OK, 1, history.I64(2)), write(1, history.Fail, 1, history.I64(1))), 9, checker.DamageRefusedStale, "refused"},
		// The recorder's times strictly increase: the overlap is
		// certain at the second grant.
		{"an overlap stops first", false, cat(grant(1, "a"), grant(2, "b"), write(2, history.OK, 1, nil)), 3, StopOverlap, "believed"},
		{"with a grace, the earlier holder's refused write ends it", true, cat(grant(1, "a"), grant(2, "b"),
			write(2, history.OK, 1, history.I64(2)), write(1, history.Fail, 1, history.I64(1)), release(1, "a")), 7, StopOverlap, "believed"},
		{"with a grace, the earlier holder's release ends it", true, cat(grant(1, "a"), grant(2, "b"),
			write(2, history.OK, 1, nil), release(1, "a")), 6, StopOverlap, "believed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFirstStop(tc.grace, checker.Options{})
			at, by, why := int64(-1), "", ""
			for _, op := range tc.ops {
				act, b, w := fs.observe(op)
				if b != "" {
					if by != "" {
						t.Fatalf("a second reason at event %d: %s", op.Index, w)
					}
					by, why = b, w
				}
				if act == stopNow {
					at = op.Index
					break
				}
			}
			if at != tc.at || by != tc.by || !strings.Contains(why, tc.reason) {
				t.Fatalf("stopped at event %d by %q (%s); want event %d by %q, saying %q", at, by, why, tc.at, tc.by, tc.reason)
			}
		})
	}
}
