package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// ctxAcquire adds an ok acquire of a lease whose lock ends its holder's
// belief itself (a context it cancels): no valid_until, TTL 1000 ms.
func (b *hb) ctxAcquire(p int, key string, inv, comp int64, token string) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, key, &history.Value{TTL: ms(1000)})
	return b.ev(comp, p, history.OK, history.Acquire, key, &history.Value{Token: token, Context: true})
}

// ctxRenewal adds the lock's own renewal of token, sent at from and
// completed at at with outcome, for 1000 ms.
func (b *hb) ctxRenewal(p int, key string, from, at int64, outcome history.Type, token string) *hb {
	return b.ev(at, p, history.Background, history.Extend, key,
		&history.Value{TTL: ms(1000), Token: token, From: history.I64(ms(from)), Outcome: outcome})
}

// revoked adds the moment the lock cancelled the context of token, for why.
func (b *hb) revoked(p int, key string, at int64, token, why string) *hb {
	return b.ev(at, p, history.Background, history.Extend, key,
		&history.Value{Token: token, From: history.I64(ms(at)), Outcome: history.Fail, Ended: why})
}

// A belief that ends by the lock's own notification is judged both ways:
// the context's end against the key's life (the lease model: grant or the
// last renewal's completion + TTL, 10 ms of tolerance), and the belief
// against the next holder's (exclusion). Each case is a recorded history
// replayed through the checkers.
func TestBeliefEndedByTheLock(t *testing.T) {
	const n, d = history.EndedNotification, history.EndedDeadline
	cases := []struct {
		name               string
		b                  *hb
		overClaims         int
		overlaps           int
		dishonest          int
		suspended          int
		opts               Options
		storyHas           string
		endReason, endedBy string
	}{
		{name: "cancelled before the key could expire: safe",
			b: new(hb).ctxAcquire(1, "k", 0, 5, "a").ctxRenewal(1, "k", 500, 505, ok, "a").revoked(1, "k", 1400, "a", n).
				ctxAcquire(2, "k", 1600, 1605, "b"),
			endReason: EndRevoked, endedBy: n},
		{name: "cancelled at the key's expiry + tolerance: just misses it",
			b:         new(hb).ctxAcquire(1, "k", 0, 5, "a").ctxRenewal(1, "k", 500, 505, ok, "a").revoked(1, "k", 1515, "a", d),
			endReason: EndRevoked, endedBy: d},
		{name: "still live 1 ms past it: a belief past its key",
			b:          new(hb).ctxAcquire(1, "k", 0, 5, "a").ctxRenewal(1, "k", 500, 505, ok, "a").revoked(1, "k", 1516, "a", d),
			overClaims: 1, storyHas: "a belief past its key", endReason: EndRevoked, endedBy: d},
		{name: "the next holder granted while the context is still live: an overlap too",
			b: new(hb).ctxAcquire(1, "k", 0, 5, "a").ctxAcquire(2, "k", 1010, 1020, "b").revoked(1, "k", 1100, "a", n).
				revoked(2, "k", 1200, "b", n),
			overClaims: 1, overlaps: 1, storyHas: "still live at 1.100s", endReason: EndRevoked, endedBy: n},
		{name: "cancelled before the next grant: no overlap",
			b:         new(hb).ctxAcquire(1, "k", 0, 5, "a").revoked(1, "k", 1000, "a", n).ctxAcquire(2, "k", 1010, 1020, "b"),
			endReason: EndRevoked, endedBy: n},
		{name: "a renewal of unknown outcome may have kept the key",
			b:         new(hb).ctxAcquire(1, "k", 0, 5, "a").ctxRenewal(1, "k", 500, 900, info, "a").revoked(1, "k", 1800, "a", d),
			endReason: EndRevoked, endedBy: d},
		{name: "a failed renewal keeps nothing alive",
			b:          new(hb).ctxAcquire(1, "k", 0, 5, "a").ctxRenewal(1, "k", 500, 505, fail, "a").revoked(1, "k", 1200, "a", d),
			overClaims: 1, endReason: EndRevoked, endedBy: d},
		{name: "released while live past its key: a belief past its key (the release is not judged twice)",
			b:          new(hb).ctxAcquire(1, "k", 0, 5, "a").release(1, "k", 1600, 1602, ok, "a"),
			overClaims: 1, endReason: EndRelease},
		{name: "a renewal in flight when the belief ended, recorded after, may have kept the key",
			b: new(hb).ctxAcquire(1, "k", 0, 5, "a").release(1, "k", 1200, 1202, ok, "a").
				ctxRenewal(1, "k", 500, 1203, info, "a"),
			endReason: EndRelease},
		{name: "a clock fault may have kept the key: not judged",
			b: new(hb).ctxAcquire(1, "k", 0, 5, "a").fault(100, "clock-offset", "start", "n1").revoked(1, "k", 1600, "a", n).
				fault(1700, "clock-offset", "stop", "n1"),
			opts: Options{ClockFaults: []string{"clock-offset"}}, suspended: 1, endReason: EndRevoked, endedBy: n},
		{name: "a lease with a deadline is not a context lease: its background end still ends it, unjudged",
			b: new(hb).acquire(1, "k", 0, 5, ok, "a", -1).revoked(1, "k", 3000, "a", n).
				acquire(2, "k", 3100, 3105, ok, "b", 4000),
			endReason: EndRevoked, endedBy: n},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := c.opts
			opts.TTL = time.Second
			ops := c.b.build(t)
			r := Check(ops, opts)
			l := r.Lease
			if l.OverClaims != c.overClaims || l.DishonestOps != c.dishonest || l.Suspended != c.suspended || r.Exclusion.Count != c.overlaps {
				t.Fatalf("over-claims %d, dishonest %d, suspended %d, overlaps %d; want %d, %d, %d, %d\n%+v",
					l.OverClaims, l.DishonestOps, l.Suspended, r.Exclusion.Count, c.overClaims, c.dishonest, c.suspended, c.overlaps, l)
			}
			if bad := c.overClaims+c.dishonest+c.overlaps > 0; bad != (r.Verdict == VerdictUnsafe) {
				t.Errorf("verdict %s with %d findings", r.Verdict, c.overClaims+c.dishonest+c.overlaps)
			}
			var stories []string
			for _, o := range l.OverClaimed {
				stories = append(stories, o.Story)
			}
			if s := strings.Join(stories, "\n"); !strings.Contains(s, c.storyHas) {
				t.Errorf("stories do not say %q:\n%s", c.storyHas, s)
			}
			h := Holds(ops)[0]
			if h.EndReason != c.endReason || h.RevokedBy != c.endedBy {
				t.Errorf("the first hold ended by %q (%q), want %q (%q)", h.EndReason, h.RevokedBy, c.endReason, c.endedBy)
			}
		})
	}
}
