package checker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/history"
)

// nfTTL is the lease of the never-frees tests: its margin is 2.005 s
// (2 s and the lease model's 5 ms tolerance), so a key set at t by a grant
// lives until t + 500 ms at the latest, and a refusal counts from
// t + 2.505 s.
const nfTTL = 500

// grantTTL adds an ok acquire by p of key k asking for ttl ms, with no
// deadline when vuMs < 0, and nodes when given.
func (b *hb) grantTTL(p int, inv, comp, ttl, vuMs int64, nodes ...string) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(ttl)})
	v := &history.Value{Token: "t" + history.ProcessName(p), Nodes: nodes}
	if vuMs >= 0 {
		v.ValidUntil = vu(vuMs)
	}
	return b.ev(comp, p, history.OK, history.Acquire, "k", v)
}

// tryTTL adds an acquire by p of key k asking for nfTTL, completed at
// comp with typ.
func (b *hb) tryTTL(p int, inv, comp int64, typ history.Type) *hb {
	b.ev(inv, p, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(nfTTL)})
	return b.ev(comp, p, typ, history.Acquire, "k", nil)
}

// refusals adds refused acquires of 1 ms by processes procs in turn, one
// every step ms from from to to, one at a time.
func (b *hb) refusals(from, to, step int64, procs ...int) *hb {
	for i, t := 0, from; t <= to; i, t = i+1, t+step {
		b.tryTTL(procs[i%len(procs)], t, t+1, fail)
	}
	return b
}

// crashedHolder is process 1 granted k at 0-4 with no deadline, crashed at
// 100: its key may live until 504 ms, refusals count from 2509 ms.
func crashedHolder() *hb { return new(hb).grantTTL(1, 0, 4, nfTTL, -1).crash(100, 1) }

func TestNeverFrees(t *testing.T) {
	disrupt := Options{TTL: nfTTL * time.Millisecond, DisruptFaults: []string{"pause", "partition"}, ClockFaults: []string{"clock-skew"},
		InOpFaults: []string{"client-kill-in-op"}}
	cases := []struct {
		name    string
		b       *hb
		flagged bool
		story   []string // what the first witness's story must say
	}{
		{"a crashed no-TTL holder, then refusals to the end", crashedHolder().refusals(200, 5000, 100, 2, 3), true,
			[]string{"k was refused", "to 2 clients", "process 1's grant at 0.004s, TTL 500ms", "until 0.504s", "process 1 crashed at 0.100s", "outlived every client"}},
		{"refusals that end within TTL + margin", crashedHolder().refusals(200, 2500, 100, 2, 3), false, nil},
		{"refusals just past TTL + margin", crashedHolder().refusals(200, 2600, 100, 2, 3), true, nil},
		{"a live holder with no deadline", new(hb).grantTTL(1, 0, 4, nfTTL, -1).refusals(200, 5000, 100, 2, 3), false, nil},
		{"a key set with PX 20×TTL by a lock whose belief is TTL, freed at 10 s",
			new(hb).grantTTL(1, 0, 4, nfTTL, 450).refusals(500, 9950, 50, 2, 3, 4).grantTTL(2, 10000, 10004, nfTTL, 10450), true,
			[]string{"process 1's lease ran out at 0.450s"}},
		{"Laravel's whole second for a 500 ms TTL, freed at 1 s",
			new(hb).grantTTL(1, 0, 4, nfTTL, 450).refusals(500, 1000, 50, 2, 3, 4).grantTTL(2, 1010, 1014, nfTTL, 1460), false, nil},
		{"malkusch/lock's whole second + 1 s for a 500 ms TTL, freed at 2 s",
			new(hb).grantTTL(1, 0, 4, nfTTL, -1).crash(100, 1).refusals(500, 2000, 50, 2, 3, 4).grantTTL(2, 2010, 2014, nfTTL, -1), false, nil},
		{"an unknown acquire during a server pause, refusals until TTL + margin after the pause",
			new(hb).fault(1000, "pause", "start", "n1").tryTTL(1, 1100, 1300, info).tryTTL(1, 1400, 1401, fail).tryTTL(1, 3050, 3051, fail).refusals(1400, 2900, 100, 2, 3).
				fault(3000, "pause", "stop", "n1").refusals(3100, 5400, 100, 2, 3), false, nil},
		{"an unknown acquire during a server pause, refusals past TTL + margin after the pause",
			new(hb).fault(1000, "pause", "start", "n1").tryTTL(1, 1100, 1300, info).tryTTL(1, 1400, 1401, fail).tryTTL(1, 3050, 3051, fail).
				fault(3000, "pause", "stop", "n1").refusals(3100, 6000, 100, 2, 3), true,
			[]string{"process 1's acquire whose outcome is unknown at 3.051s"}},
		{"refusals during a partition", crashedHolder().fault(150, "partition", "start", "n1").refusals(200, 5900, 100, 2, 3).
			fault(6000, "partition", "stop", "n1"), false, nil},
		{"the same refusals without the partition", crashedHolder().refusals(200, 5900, 100, 2, 3), true, nil},
		{"a clock slowed on the node since before the grant", new(hb).fault(0, "clock-skew", "start", "n1").
			grantTTL(1, 50, 54, nfTTL, -1).crash(100, 1).refusals(200, 5000, 100, 2, 3).fault(5100, "clock-skew", "stop", "n1"), false, nil},
		{"a clock fault that ended before the grant", new(hb).fault(0, "clock-skew", "start", "n1").fault(20, "clock-skew", "stop", "n1").
			grantTTL(1, 50, 54, nfTTL, -1).crash(100, 1).refusals(200, 5000, 100, 2, 3), true, nil},
		{"a renewal after the crash keeps the key", crashedHolder().renewal(1, 995, 1000, history.OK).refusals(200, 3400, 100, 2, 3), false, nil},
		{"refusals past the renewal's TTL + margin", crashedHolder().renewal(1, 995, 1000, history.OK).refusals(200, 4000, 100, 2, 3), true,
			[]string{"process 1's background renewal at 1.000s"}},
		{"a refusal awaiting a grant in flight is judged after it",
			crashedHolder().refusals(2600, 2700, 100, 4).grantTTL(2, 2800, 2810, nfTTL, 3300).tryTTL(3, 2801, 2802, fail), false, nil},
		{"the same with the attempt in flight refused",
			crashedHolder().refusals(2600, 2700, 100, 4).tryTTL(2, 2800, 2810, fail).tryTTL(3, 2801, 2802, fail), true, nil},
		{"a client crashed mid-acquire, refusals within TTL + margin of the crash",
			new(hb).ev(0, 1, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(nfTTL)}).crash(100, 1).refusals(200, 2600, 100, 2, 3), false, nil},
		{"a client crashed mid-acquire, refusals past TTL + margin of the crash",
			new(hb).ev(0, 1, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(nfTTL)}).crash(100, 1).refusals(200, 3000, 100, 2, 3), true,
			[]string{"process 1's acquire whose outcome is unknown at 0.100s"}},
		// A client in another process may still be working on a request
		// the harness gave up on; it has done with it by its next answer.
		{"an unknown acquire whose client never answers again",
			new(hb).tryTTL(1, 100, 300, info).refusals(400, 5000, 100, 2, 3), false, nil},
		{"an unknown acquire whose client answers 1.7 s later, refusals within TTL + margin of that",
			new(hb).tryTTL(1, 100, 300, info).tryTTL(1, 1900, 2000, fail).refusals(400, 4400, 100, 2, 3), false, nil},
		{"an unknown acquire whose client answers 1.7 s later, refusals past TTL + margin of that",
			new(hb).tryTTL(1, 100, 300, info).tryTTL(1, 1900, 2000, fail).refusals(400, 5000, 100, 2, 3), true,
			[]string{"process 1's acquire whose outcome is unknown at 2.000s"}},
		{"refusals recorded as per-second counts", crashedHolder().summaries(1000, 3000, 2), true, []string{"3 times to 1 client from 1.000s to 3.000s"}},
		{"per-second counts within TTL + margin", crashedHolder().summaries(1000, 1000, 2), false, nil},
		{"multi-node: refusals overlapped by other attempts", new(hb).grantTTL(1, 0, 4, nfTTL, -1, "n1", "n2", "n3").crash(100, 1).
			overlapping(200, 5000, 100), false, nil},
		// A multi-node attempt refused by a majority while a minority was
		// cut off: its SET may reach the cut-off nodes when the link
		// heals, and refuse the next attempts for a TTL.
		{"an attempt refused during a partition, refusals within TTL + margin after it heals",
			new(hb).grantTTL(1, 0, 4, nfTTL, -1, "n1", "n2", "n3").crash(100, 1).fault(3000, "partition", "start", "n1").
				tryTTL(4, 3100, 3200, fail).fault(4000, "partition", "stop", "n1").tryTTL(4, 4050, 4051, fail).refusals(4100, 6500, 100, 2, 3), false, nil},
		{"an attempt refused during a partition, refusals past TTL + margin after it heals",
			new(hb).grantTTL(1, 0, 4, nfTTL, -1, "n1", "n2", "n3").crash(100, 1).fault(3000, "partition", "start", "n1").
				tryTTL(4, 3100, 3200, fail).fault(4000, "partition", "stop", "n1").tryTTL(4, 4050, 4051, fail).refusals(4100, 7000, 100, 2, 3), true, nil},
		// An in-op kill is recorded before its call's unknown completion,
		// and the killed process never answers again: the call took
		// effect by the kill (SETNX, then no PEXPIRE).
		{"a client killed in its acquire, refusals past TTL + margin of the kill",
			new(hb).ev(0, 1, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(nfTTL)}).inOpKill(100, 1).
				ev(110, 1, history.Info, history.Acquire, "k", nil).refusals(200, 3000, 100, 2, 3), true,
			[]string{"process 1's acquire whose outcome is unknown at 0.110s"}},
		{"a client killed in its acquire, refusals within TTL + margin of the kill",
			new(hb).ev(0, 1, history.Invoke, history.Acquire, "k", &history.Value{TTL: ms(nfTTL)}).inOpKill(100, 1).
				ev(110, 1, history.Info, history.Acquire, "k", nil).refusals(200, 2600, 100, 2, 3), false, nil},
		// Latency and reply loss touch only replies (not DisruptFaults):
		// refusals under whole-run latency are the server's own.
		{"refusals under latency on every reply", crashedHolder().fault(150, "latency", "start", "n1").refusals(200, 5900, 100, 2, 3), true, nil},
		{"multi-node: refusals one at a time", new(hb).grantTTL(1, 0, 4, nfTTL, -1, "n1", "n2", "n3").crash(100, 1).
			refusals(200, 5000, 100, 2, 3), true, nil},
	}
	// Where the servers keep keys past their TTL by themselves (etcd),
	// nothing is held against the lock.
	renews := disrupt
	renews.ServerRenewsLeases = "the leader renews leases"
	if nf := Check(crashedHolder().refusals(200, 5000, 100, 2, 3).build(t), renews).NeverFrees; nf.Episodes != 0 || nf.Suspended == "" {
		t.Errorf("servers that renew leases: %+v", nf)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.b.build(t), disrupt)
			nf := r.NeverFrees
			if (nf.Episodes > 0) != c.flagged || nf.Valid == c.flagged {
				t.Fatalf("never frees: %+v, want flagged %v", nf, c.flagged)
			}
			mech := slices.ContainsFunc(r.Answers.Mechanisms, func(m Mechanism) bool { return m.Kind == MechNeverFrees })
			if mech != c.flagged || (c.flagged && (r.Answers.Lock != AnswerUnsafe || r.Verdict != VerdictStuck)) {
				t.Fatalf("verdict %s, answers %+v, want never-frees %v", r.Verdict, r.Answers, c.flagged)
			}
			if c.flagged {
				t.Log(nf.Witnesses[0].Story)
				checkStory(t, nf.Witnesses[0].Story, c.story, nil)
			}
			// The watcher a run stops with flags the same refusal.
			w := NewNeverFreesWatcher(disrupt)
			var first *NeverFree
			for _, op := range c.b.build(t) {
				first = w.Observe(op)
			}
			if (first != nil) != c.flagged || (first != nil && first.Flagged != nf.Witnesses[0].Flagged) {
				t.Fatalf("the watcher flagged %+v, the check %+v", first, nf.Witnesses)
			}
		})
	}
}

// renewal adds a background renewal of k by p, sent at from, completed at
// at with outcome.
func (b *hb) renewal(p int, from, at int64, outcome history.Type) *hb {
	return b.ev(at, p, history.Background, history.Extend, "k",
		&history.Value{TTL: ms(nfTTL), Token: "t" + history.ProcessName(p), From: history.I64(ms(from)), Outcome: outcome})
}

// summaries adds one per-second count of 5 refused acquires by p, from
// each whole second from to to, over 900 ms.
func (b *hb) summaries(from, to int64, p int) *hb {
	for t := from; t <= to; t += 1000 {
		b.ev(t+900, p, history.Summary, history.Acquire, "k", &history.Value{Count: 5, From: history.I64(ms(t)), To: history.I64(ms(t + 900))})
	}
	return b
}

// overlapping adds refusals in pairs that overlap (processes 2 and 3
// together), one pair every step ms.
func (b *hb) overlapping(from, to, step int64) *hb {
	for t := from; t <= to; t += step {
		b.tryTTL(2, t, t+2, fail).tryTTL(3, t+1, t+3, fail)
	}
	return b
}

// The summary of a run whose key outlived every client but freed before
// the end: stuck by the never-frees check alone, the lock's answer first.
func TestNeverFreesSummary(t *testing.T) {
	ops := new(hb).grantTTL(1, 0, 4, nfTTL, 450).refusals(500, 9950, 50, 2, 3, 4).grantTTL(2, 10000, 10004, nfTTL, 10450).build(t)
	r := Check(ops, Options{TTL: nfTTL * time.Millisecond})
	if r.Liveness.Stuck || r.Verdict != VerdictStuck {
		t.Fatalf("liveness stuck %v, verdict %s", r.Liveness.Stuck, r.Verdict)
	}
	lines := strings.Join(r.Summary(), "\n")
	checkStory(t, lines, []string{"STUCK: 1 episode of a key refused to every client after every lease that could hold it had ended; the first: k was refused",
		"answers: THE LOCK BROKE: the lock never frees", "first violation: key refused after every lease that could hold it at 2.550s"}, nil)
}

// inOpKill adds an in-op kill of procs at t, as the nemesis records it.
func (b *hb) inOpKill(t int64, procs ...int) *hb {
	return b.ev(t, history.NemesisProcess, history.Info, "client-kill-in-op", "", &history.Value{Phase: "start", Clients: procs})
}
