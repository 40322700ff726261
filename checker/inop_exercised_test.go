package checker

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// killInOp is an in-op kill of procs at t, as nemesis.ClientFaults
// records it.
func (b *hb) killInOp(t int64, procs ...int) *hb {
	return b.ev(t, history.NemesisProcess, history.Info, "client-kill-in-op", "", &history.Value{Phase: "start", Clients: procs})
}

// TestInOpMoments: the moments of faults inside an operation, each in a
// history that has it and one that just misses it. The faults are named
// by Options, as the harness names them from the nemesis's descriptors.
func TestInOpMoments(t *testing.T) {
	opts := Options{ReplyLossFaults: []string{"reply-loss"}, InOpFaults: []string{"client-kill-in-op"}}
	for _, c := range []struct {
		name string
		b    *hb
		want Exercised
	}{
		// replies_lost
		{"reply lost: an acquire invoked under reply-loss came back unknown", new(hb).fault(0, "reply-loss", "start", "n1").
			acquire(1, "k", 10, 260, info, "", 0).fault(1000, "reply-loss", "stop", "n1"), Exercised{RepliesLost: 1}},
		{"reply lost: the fault began while a release was pending", held(1000).release(1, "k", 50, 400, info, "a").
			fault(100, "reply-loss", "start", "n1").fault(1000, "reply-loss", "stop", "n1"),
			Exercised{RepliesLost: 1}},
		{"reply lost: an extend invoked just before the stop", held(1000).fault(20, "reply-loss", "start", "n1").
			extend(1, "k", 90, 350, info, "a", 0).fault(100, "reply-loss", "stop", "n1"),
			Exercised{RepliesLost: 1, NodeFaults: 1}},
		{"no reply lost: the acquire was invoked after the stop", new(hb).fault(0, "reply-loss", "start", "n1").
			fault(100, "reply-loss", "stop", "n1").acquire(1, "k", 110, 360, info, "", 0), Exercised{}},
		{"no reply lost: a reply came (a definite no)", new(hb).fault(0, "reply-loss", "start", "n1").
			acquire(1, "k", 10, 20, fail, "", 0).fault(100, "reply-loss", "stop", "n1"), Exercised{}},
		{"no reply lost: an unknown write is no lock call", held(1000).fault(20, "reply-loss", "start", "n9").
			write(1, "k", 30, 300, info, 1, nil).fault(400, "reply-loss", "stop", "n9"), Exercised{NodeFaults: 1}},
		{"no reply lost: a partition is not named a reply loss", new(hb).fault(0, "partition", "start", "n1").
			acquire(1, "k", 10, 260, info, "", 0).fault(1000, "partition", "stop", "n1"), Exercised{}},
		// clients_killed_in_op
		{"killed in op: during an acquire", new(hb).acquire(1, "k", 0, 30, info, "", 0).killInOp(10, 1), Exercised{KilledInOp: 1}},
		{"killed in op: during a release, with the lease live", held(1000).release(1, "k", 50, 70, info, "a").killInOp(60, 1),
			Exercised{KilledInOp: 1}},
		{"not killed in op: the kill came after the call", new(hb).acquire(1, "k", 0, 30, fail, "", 0).killInOp(40, 1), Exercised{}},
		{"not killed in op: another process's call was pending", new(hb).acquire(1, "k", 0, 30, info, "", 0).killInOp(10, 2), Exercised{}},
		{"not killed in op: a pending write is no lock call", held(1000).write(1, "k", 20, 50, info, 1, nil).killInOp(30, 1), Exercised{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.b.build(t), opts)
			if r.Exercised == nil || *r.Exercised != c.want {
				t.Fatalf("exercised %+v, want %+v", r.Exercised, c.want)
			}
		})
	}
}
