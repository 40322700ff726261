package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// The helpers' TTL is 1000 ms, so the lease model's tolerance is 10 ms
// (1% of it): a grant invoked at 0 may claim validity up to 1010 ms, and
// a release of it invoked later than completion + 1010 ms cannot honestly
// succeed.
func TestLeaseTolerance(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{50 * time.Millisecond, time.Millisecond},
		{100 * time.Millisecond, time.Millisecond},
		{500 * time.Millisecond, 5 * time.Millisecond},
		{time.Second, 10 * time.Millisecond},
	} {
		if got := LeaseTolerance(c.ttl); got != c.want {
			t.Errorf("LeaseTolerance(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// shortTTL adds an acquire with a 100 ms TTL, whose tolerance is 1 ms.
func (b *hb) shortTTL(p int, key string, inv, comp int64, token string, vuNs int64) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, key, &history.Value{TTL: ms(100)})
	return b.ev(comp, p, history.OK, history.Acquire, key, &history.Value{Token: token, ValidUntil: history.I64(vuNs)})
}

func TestLeaseModel(t *testing.T) {
	cases := []struct {
		name                  string
		b                     *hb
		overClaims, dishonest int
		suspended             int
		opts                  Options
		storyHas              string
	}{
		// Over-claim on grants.
		{name: "validity exactly invoke + TTL + tolerance is legal",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 1010)},
		{name: "validity 1 ms past the tolerance is an over-claim",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 1011), overClaims: 1, storyHas: "over-claimed validity"},
		{name: "a 100 ms TTL: exactly invoke + TTL + 1 ms is legal",
			b: new(hb).shortTTL(1, "k", 10, 20, "a", ms(111))},
		{name: "a 100 ms TTL: 1 ms over the tolerance is an over-claim",
			b: new(hb).shortTTL(1, "k", 10, 20, "a", ms(112)), overClaims: 1},
		{name: "validity counted from the reply (a slow grant) is an over-claim",
			b: new(hb).acquire(1, "k", 0, 100, ok, "a", 1095), overClaims: 1, storyHas: "95ms too long"},
		{name: "a client in another process counts from its own start, not the invoke",
			b: new(hb).ev(0, 1, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(1000)}).
				ev(60, 1, history.OK, history.Acquire, "k", &history.Value{Token: "a", ValidUntil: vu(1045), Started: history.I64(ms(50))})},
		{name: "its start cannot be later than the answer",
			b: new(hb).ev(0, 1, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(1000)}).
				ev(60, 1, history.OK, history.Acquire, "k", &history.Value{Token: "a", ValidUntil: vu(1500), Started: history.I64(ms(600))}), overClaims: 1},
		{name: "no validity claimed: nothing to judge",
			b: new(hb).acquire(1, "k", 0, 100, ok, "a", -1)},
		{name: "an over-claim counts without any overlap",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 1500).release(1, "k", 20, 25, ok, "a"), overClaims: 1},
		// Over-claim on extends.
		{name: "extend validity within invoke + TTL is legal",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 900).extend(1, "k", 500, 510, ok, "a", 1490)},
		{name: "extend validity beyond the extend's invoke + TTL is an over-claim",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 900).extend(1, "k", 500, 510, ok, "a", 1600), overClaims: 1, storyHas: "extend"},
		// Release honesty.
		{name: "an ok release before the key's latest expiry is honest",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1000, 1002, ok, "a")},
		{name: "an ok release at exactly completion + TTL + tolerance is honest",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1015, 1020, ok, "a")},
		{name: "an ok release invoked after the key certainly expired is dishonest",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1500, 1502, ok, "a"), dishonest: 1, storyHas: "plain DEL"},
		{name: "a failed release after expiry is what a correct lock says",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1500, 1502, fail, "a")},
		{name: "a lock that claims no deadline promises no expiry: a late release may succeed",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", -1).release(1, "k", 5000, 5002, ok, "a")},
		{name: "a release with an unknown outcome is never judged",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1500, 1502, info, "a")},
		{name: "a release that never completed is never judged",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1500, -1, ok, "a")},
		{name: "an ok extend keeps the key alive for the next release",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).extend(1, "k", 900, 910, ok, "a", 1890).release(1, "k", 1800, 1802, ok, "a")},
		{name: "an unknown extend may have kept the key alive",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).extend(1, "k", 900, 910, info, "a", 0).release(1, "k", 1800, 1802, ok, "a")},
		{name: "a failed extend keeps nothing alive",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).extend(1, "k", 900, 910, fail, "a", 0).release(1, "k", 1800, 1802, ok, "a"), dishonest: 1},
		// Extend honesty.
		{name: "an ok extend after the key certainly expired is dishonest",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).extend(1, "k", 1500, 1510, ok, "a", 2400), dishonest: 1, storyHas: "dishonest extend"},
		{name: "a failed extend after expiry is honest",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).extend(1, "k", 1500, 1510, fail, "a", 0)},
		// A shared token is one key on the server.
		{name: "another grant of the same token renews the key",
			b: new(hb).acquire(1, "k", 0, 5, ok, "t", 990).acquire(2, "k", 1200, 1205, ok, "t", 2190).release(1, "k", 1500, 1502, ok, "t")},
		// Where the server may keep a key longer, honesty is not judged.
		{name: "a clock fault during the lease suspends the judgement",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", 990).fault(200, "clock-jump", "start", "n1").fault(400, "clock-jump", "stop", "n1").
				release(1, "k", 1500, 1502, ok, "a"),
			opts: Options{ClockFaults: []string{"clock-jump"}}, suspended: 1},
		{name: "a clock fault that ended before the lease does not",
			b: new(hb).fault(0, "clock-jump", "start", "n1").fault(1, "clock-jump", "stop", "n1").acquire(1, "k", 10, 15, ok, "a", 990).
				release(1, "k", 1500, 1502, ok, "a"),
			opts: Options{ClockFaults: []string{"clock-jump"}}, dishonest: 1},
		{name: "a server that renews leases itself (etcd) suspends every judgement",
			b:    new(hb).acquire(1, "k", 0, 5, ok, "a", 990).release(1, "k", 1500, 1502, ok, "a"),
			opts: Options{ServerRenewsLeases: "etcd's leader renews leases"}, suspended: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.TTL = time.Second
			r := Check(c.b.build(t), opts)
			l := r.Lease
			if l.OverClaims != c.overClaims || l.DishonestOps != c.dishonest || l.Suspended != c.suspended {
				t.Fatalf("over-claims %d, dishonest %d, suspended %d; want %d, %d, %d\n%+v",
					l.OverClaims, l.DishonestOps, l.Suspended, c.overClaims, c.dishonest, c.suspended, l)
			}
			bad := c.overClaims+c.dishonest > 0
			if l.Valid == bad {
				t.Errorf("lease valid = %v with %d findings", l.Valid, c.overClaims+c.dishonest)
			}
			if bad && r.Verdict != VerdictUnsafe {
				t.Errorf("verdict %s; a lease-model finding must make the run unsafe", r.Verdict)
			}
			if bad && r.First.OverClaim == nil && r.First.Dishonest == nil {
				t.Error("results record no time of the first finding")
			}
			if c.storyHas != "" {
				var stories []string
				for _, o := range l.OverClaimed {
					stories = append(stories, o.Story)
				}
				for _, d := range l.Dishonesty {
					stories = append(stories, d.Story)
				}
				if s := strings.Join(stories, "\n"); !strings.Contains(s, c.storyHas) {
					t.Errorf("stories do not say %q:\n%s", c.storyHas, s)
				}
			}
		})
	}
}

// The summary names a lease-model finding in the verdict line when there
// is no overlap to name, and says when the first one showed.
func TestLeaseSummary(t *testing.T) {
	r := Check(new(hb).acquire(1, "k", 0, 100, ok, "a", 1095).release(1, "k", 200, 210, ok, "a").build(t), Options{TTL: time.Second})
	s := strings.Join(r.Summary(), "\n")
	for _, want := range []string{"UNSAFE: 1 grant or extend claimed validity that no server could keep", "the largest over-claim: 95ms", "first violation: over-claim at 0.100s"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
