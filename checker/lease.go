package checker

import (
	"fmt"
	"strings"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// The lease model judges what a lock told its client against what any
// server could have kept, with no fault needed to show it:
//
//   - Over-claim. The server cannot start a key's TTL before the request
//     that set it was sent, and the harness stamps the invocation before
//     the lock sends anything. A grant or extend whose valid_until lies
//     beyond invoke + TTL + tolerance promised what no server could keep.
//   - A belief past its key. A lock that gives its holder a context it
//     cancels itself (history.Value.Context: rueidislock's) claims no
//     deadline; its holder believes until the context ends. The key its
//     grant and its own renewals set expires at the latest at the last
//     one's completion + TTL. A belief that lasts past that (plus the
//     tolerance) is an over-claim, however the lock meant to learn of the
//     loss (a notification, a renewal's deadline).
//   - Dishonesty. A correct compare-and-delete or compare-and-extend
//     cannot succeed once its key has expired. The key set by a grant or
//     extend expires at the latest at that operation's completion + TTL. A
//     release or extend that reports success although it was invoked later
//     than that (plus the tolerance) did not check what it claims to.
//
// The tolerance absorbs the few microseconds between the harness's stamp
// and the lock's own, and Redis's millisecond expiry: an over-claim
// smaller than it cannot be told from honest rounding and is not judged.

// LeaseTolerance is the slack of the lease model for a TTL: the larger of
// 1 ms and 1% of the TTL.
func LeaseTolerance(ttl time.Duration) time.Duration {
	return max(time.Millisecond, ttl/100)
}

// LeaseOp is the operation a finding of the lease model is about.
type LeaseOp struct {
	Key     string `json:"key"`
	Process int    `json:"process"`
	F       string `json:"f"` // acquire or extend (OverClaim), release or extend (Dishonest)
	Token   string `json:"token,omitempty"`
	Index   int64  `json:"index"` // the ok completion
	Invoke  int64  `json:"invoke"`
}

func leaseOp(inv, comp *history.Op, key, token string) LeaseOp {
	return LeaseOp{Key: key, Process: inv.Process, F: inv.F, Token: token, Index: comp.Index, Invoke: inv.Time}
}

// OverClaim is a grant or extend whose validity outlasts anything the
// server could have kept.
type OverClaim struct {
	LeaseOp
	At  int64 `json:"at"` // the ok completion's time
	TTL int64 `json:"ttl_ns"`
	// ValidUntil is what the lock claimed; Limit is invoke + TTL, the
	// latest any server could keep the key; Margin is by how much the
	// claim passed the limit.
	ValidUntil int64  `json:"valid_until"`
	Limit      int64  `json:"limit"`
	Margin     int64  `json:"margin_ns"`
	Story      string `json:"story"`
}

// Dishonest is a release or extend that reported success on a lease whose
// key had certainly expired before it was invoked.
type Dishonest struct {
	LeaseOp
	// Expiry is the latest the lease's key could have lived: the last
	// successful grant or extend's completion plus its TTL; Late is how
	// long after it (beyond the tolerance) the operation was invoked.
	Expiry int64  `json:"expiry"`
	Late   int64  `json:"late_ns"`
	Story  string `json:"story"`
}

// LeaseResult is the lease model's verdict.
type LeaseResult struct {
	Valid bool `json:"valid"`
	// Claims counts the grants and extends with a validity that were
	// judged; Judged the successful releases and extends judged for
	// honesty.
	Claims int `json:"claims"`
	Judged int `json:"judged"`
	// OverClaims and DishonestOps count every finding; the lists keep the
	// first MaxViolations of each.
	OverClaims   int         `json:"over_claims"`
	DishonestOps int         `json:"dishonest"`
	OverClaimed  []OverClaim `json:"over_claimed,omitempty"`
	Dishonesty   []Dishonest `json:"dishonesty,omitempty"`
	// Suspended counts successful releases and extends that were not
	// judged because the server may honestly have kept the key past its
	// TTL; SuspendedWhy says why.
	Suspended    int    `json:"suspended,omitempty"`
	SuspendedWhy string `json:"suspended_why,omitempty"`
	// ToleranceNs is the tolerance of the run's TTL (0 when the TTL is
	// unknown; each operation uses its own TTL's).
	ToleranceNs int64 `json:"tolerance_ns"`
}

// leaseKey is a lease's key on the server: the lock key and the token
// stored in it. Two grants with one token (a shared or reused token) are
// one key on the server, so they renew each other.
type leaseKey struct{ key, token string }

// expiry is the latest time a lease's server key could still exist.
type expiry struct {
	at      int64 // 0: no grant or extend seen
	ttl     int64 // the TTL of the grant or extend that set at
	since   int64 // the first grant's invoke: the key may have lived from then
	unknown bool  // an unknown grant or extend may have set it at any time
	// grant is the ok acquire of a lease whose lock ends its holder's
	// belief itself (a context), nil for every other lease.
	grant *contextGrant
}

// contextGrant is what the lease model keeps of the ok acquire of a
// context lease, to judge its belief when it ends.
type contextGrant struct {
	op  LeaseOp
	seq int64 // the acquire's call order
}

// beliefPastKey is the witness of a context lease's belief that lasted
// past end, beyond the latest its key could live (e).
func beliefPastKey(g *contextGrant, e expiry, end int64) OverClaim {
	o := OverClaim{LeaseOp: g.op, At: end, TTL: e.ttl, ValidUntil: end, Limit: e.at, Margin: end - e.at}
	o.Story = fmt.Sprintf("process %d held %s by a context its lock cancels itself; its grant and its lock's renewals "+
		"could keep the key until %s at the latest, but the context was still live at %s, %s later "+
		"(a belief past its key: the lock had not learnt, or not told its holder, that the key was gone)",
		o.Process, o.Key, fmtT(e.at), fmtT(end), fmtD(o.Margin))
	return o
}

func claimsValidity(comp *history.Op) bool {
	return comp.Value != nil && comp.Value.ValidUntil != nil
}

// overClaims counts an ok grant or extend that claims a validity, and
// says whether it claims more than invoke (or started) + TTL allows.
func (r *LeaseResult) overClaims(inv, comp *history.Op, ttl int64) bool {
	r.Claims++
	vu, limit := *comp.Value.ValidUntil, startOf(inv, comp)+ttl
	if vu <= limit+int64(LeaseTolerance(time.Duration(ttl))) {
		return false
	}
	r.OverClaims++
	return true
}

// overClaim is the witness of an ok acquire or extend whose validity
// reaches past from + ttl, the most any server could keep the key.
func overClaim(inv, comp *history.Op, ttl int64) OverClaim {
	from := startOf(inv, comp)
	vu, limit := *comp.Value.ValidUntil, from+ttl
	token := comp.Value.Token
	if inv.Value != nil && inv.Value.Token != "" {
		token = inv.Value.Token
	}
	o := OverClaim{LeaseOp: leaseOp(inv, comp, inv.Key, token), At: comp.Time, TTL: ttl, ValidUntil: vu, Limit: limit, Margin: vu - limit}
	o.Story = fmt.Sprintf("process %d's %s of %s was started at %s with a TTL of %s, so no server could keep the key past %s; "+
		"the lock told its client the lease was valid until %s, %s too long (over-claimed validity: the lock counts its lease from after it was sent, or forgets the time spent acquiring)",
		o.Process, o.F, o.Key, fmtT(from), fmtD(ttl), fmtT(limit), fmtT(vu), fmtD(o.Margin))
	return o
}

// dishonest is the witness of an ok release or extend of lease lk invoked
// after its key's expiry e.
func dishonest(inv, comp *history.Op, lk leaseKey, e expiry) Dishonest {
	d := Dishonest{LeaseOp: leaseOp(inv, comp, lk.key, lk.token), Expiry: e.at, Late: inv.Time - e.at}
	d.Story = dishonestStory(&d)
	return d
}

func dishonestStory(d *Dishonest) string {
	meaning := "a release that does not compare its token (a plain DEL) deleted a key that was not its own, or the lock reported success for a lock it had lost"
	if d.F == history.Extend {
		meaning = "an extend that does not compare its token revived or extended a key that was not its own, or the lock reported success for a lock it had lost"
	}
	return fmt.Sprintf("process %d's %s of %s (token %s) was invoked at %s and reported success, but the lease's key had expired on the server by %s at the latest, %s earlier: %s (dishonest %s)",
		d.Process, d.F, d.Key, d.Token, fmtT(d.Invoke), fmtT(d.Expiry), fmtD(d.Late), meaning, d.F)
}

// serverMayKeep says why a server may honestly have kept a key from from
// to to (leases the servers renew, a clock fault active meanwhile), "" if
// nothing excuses it.
func serverMayKeep(faults []*Fault, from, to int64, opts Options) string {
	if opts.ServerRenewsLeases != "" {
		return opts.ServerRenewsLeases
	}
	for _, f := range faults {
		if f.Start <= to && f.End >= from && opts.isClockFault(f.Name) {
			return fmt.Sprintf("a %s on %v may have slowed or moved back a node's clock, and a key lives by its node's clock", f.Name, f.Targets)
		}
	}
	return ""
}

// headline names the lease model's findings in one sentence.
func (r *LeaseResult) headline() string {
	var parts []string
	if r.OverClaims > 0 {
		parts = append(parts, fmt.Sprintf("%d %s claimed validity that no server could keep", r.OverClaims, plural(r.OverClaims, "grant or extend", "grants or extends")))
	}
	if r.DishonestOps > 0 {
		parts = append(parts, fmt.Sprintf("%d %s reported success on a lease that had already expired", r.DishonestOps, plural(r.DishonestOps, "release or extend", "releases or extends")))
	}
	return strings.Join(parts, "; ")
}

// leaseLines are the summary's lines on the lease model and on when each
// violation first showed.
func (r *Results) leaseLines() []string {
	var lines []string
	if l := r.Lease; l != nil && !l.Valid {
		var worst OverClaim
		for _, o := range l.OverClaimed {
			if o.Margin > worst.Margin {
				worst = o
			}
		}
		s := "lease model: " + l.headline()
		if worst.Margin > 0 {
			s += fmt.Sprintf(" (the largest over-claim: %s past invoke + TTL)", fmtD(worst.Margin))
		}
		lines = append(lines, s)
	}
	if l := r.Lease; l != nil && l.Suspended > 0 {
		lines = append(lines, fmt.Sprintf("lease model: %d successful %s not judged for honesty: %s", l.Suspended, plural(l.Suspended, "release or extend", "releases or extends"), l.SuspendedWhy))
	}
	var first []string
	for _, f := range []struct {
		what string
		at   *int64
	}{{"overlap", r.First.Violation}, {"over-claim", r.First.OverClaim}, {"dishonest release or extend", r.First.Dishonest},
		{"key refused after every lease that could hold it", r.First.NeverFrees}} {
		if f.at != nil {
			first = append(first, fmt.Sprintf("%s at %s", f.what, fmtT(*f.at)))
		}
	}
	if len(first) > 0 {
		lines = append(lines, "first violation: "+strings.Join(first, ", "))
	}
	return lines
}

// firsts finds when each kind of violation first showed.
func firsts(ex *ExclusionResult, l *LeaseResult) Firsts {
	var f Firsts
	for _, v := range ex.Violations {
		if f.Violation == nil || v.OverlapStart < *f.Violation {
			f.Violation = history.I64(v.OverlapStart)
		}
	}
	if len(l.OverClaimed) > 0 {
		// Kept in history order, so the first is the earliest.
		f.OverClaim = history.I64(l.OverClaimed[0].At)
	}
	if len(l.Dishonesty) > 0 {
		f.Dishonest = history.I64(l.Dishonesty[0].Invoke)
	}
	return f
}
