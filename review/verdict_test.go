package review

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockjepsen/lockjepsen/checker"
)

// cellOf is a cell with its runs' answers and moments already merged, as
// Cell.answer leaves it.
func cellOf(threat, mit, state string, runs []checker.Answers, moments map[string]int) Cell {
	t, _ := LookupThreat(threat)
	c := Cell{Threat: threat, Mitigation: mit, State: state, TimeLimit: 3 * time.Second, Moments: t.Moments}
	for i := range runs {
		c.Runs = append(c.Runs, RunRef{Seed: int64(i + 1), Answers: &runs[i], Exercised: moments})
	}
	if len(c.Runs) == 0 {
		c.Runs = []RunRef{{Seed: 1, Exercised: moments}, {Seed: 2}}
	}
	c.answer()
	return c
}

var (
	clean      = checker.Answers{Lock: checker.AnswerNotFound, Deployment: checker.AnswerNotFound, Use: checker.AnswerNotFound}
	useLoss    = checker.Answers{Lock: checker.AnswerNotFound, Deployment: checker.AnswerNotFound, Use: checker.AnswerUnsafe, Damage: []checker.Mechanism{{Kind: checker.MechLostUpdate, Count: 2, Says: "the resource lost 2 updates"}}}
	keyLoss    = checker.Answers{Lock: checker.AnswerNotFound, Deployment: checker.AnswerUnsafe, Use: checker.AnswerNotFound, Losses: []checker.Mechanism{{Kind: checker.MechKeyLost, Cause: "kill", Count: 1, Says: "kill took the key from a holder that did nothing wrong"}}}
	released   = checker.Answers{Lock: checker.AnswerUnsafe, Deployment: checker.AnswerNotFound, Use: checker.AnswerNotFound, Mechanisms: []checker.Mechanism{{Kind: checker.MechOverlap, Cause: checker.CauseForeignRelease, Count: 1, Says: "a release deleted another client's key", Example: "process 1's release deleted p2's key"}}}
	neverFrees = checker.Answers{Lock: checker.AnswerUnsafe, Deployment: checker.AnswerNotFound, Use: checker.AnswerNotFound, Mechanisms: []checker.Mechanism{{Kind: checker.MechNeverFrees, Count: 1, Says: "the lock never frees: a key outlived every client that could hold it, and every client was refused"}}}
	lying      = checker.Answers{Lock: checker.AnswerUnsafe, Deployment: checker.AnswerNotFound, Use: checker.AnswerNotFound, Mechanisms: []checker.Mechanism{{Kind: checker.MechDishonestRelease, Count: 6, Says: "a release reported success on a lock it no longer held"}}}
)

// The verdict leads with the lock itself: what broke in it, by
// mechanism, or that it held and how often each threat's dangerous moment
// happened; then what the deployment loses and what the use needs; a
// threat whose moment never happened is no evidence, never "not found".
func TestVerdictWording(t *testing.T) {
	cols := []Column{{Name: "fencing", Title: "fencing tokens", OnResource: true}, {Name: "fsync-always", Title: "appendfsync always"}}
	cases := []struct {
		name        string
		interrupted bool
		rows        []Row
		verdict     string
		kinds       []string
		want        []string
		absent      []string
	}{
		{
			name: "a correct lock",
			rows: []Row{
				{Threat: "client-pause", Configured: cellOf("client-pause", "", StateUnsafe, []checker.Answers{useLoss, clean}, map[string]int{checker.MomentStaleActs: 14}),
					Tried: []Cell{cellOf("client-pause", "fencing", StateNotFound, []checker.Answers{clean, clean}, map[string]int{checker.MomentStaleActs: 9})}},
				{Threat: "client-crash", Configured: cellOf("client-crash", "", StateNotFound, []checker.Answers{clean, clean}, map[string]int{checker.MomentHolderCrashes: 3})},
				{Threat: "server-restart", Configured: cellOf("server-restart", "", StateUnsafe, []checker.Answers{keyLoss, keyLoss}, map[string]int{checker.MomentNodeFaults: 2}),
					Tried: []Cell{cellOf("server-restart", "fsync-always", StateNotFound, []checker.Answers{clean, clean}, map[string]int{checker.MomentNodeFaults: 2})}},
				{Threat: "long-holds", Configured: cellOf("long-holds", "", StateNotFound, []checker.Answers{clean, clean}, nil)},
				{Threat: "partition", Configured: Cell{Threat: "partition", State: StateSkipped}},
			},
			verdict: LockHeld,
			want: []string{
				"The lock held under every threat tried: client pause (a stale holder acted 28 times), client crash (a holder crashed with its lease live 6 times) and server restart (a server fault hit a node holding a live lease's key 4 times).",
				"The deployment lost the key under server restart: kill took the key from a holder that did nothing wrong.",
				"Its use is unsafe under client pause",
				"Client pause: not found again with fencing tokens (on the resource).",
				"Server restart: not found again with appendfsync always.",
				"No evidence from long holds",
				"Not decided: partition (skipped).",
			},
			absent: []string{"The lock itself broke", "Unsafe against"},
		},
		{
			name: "a GET-then-DEL release and a lying release",
			rows: []Row{
				{Threat: "slow-network", Configured: cellOf("slow-network", "", StateUnsafe, []checker.Answers{released, clean}, map[string]int{checker.MomentSlowReplies: 40})},
				{Threat: "long-holds", Configured: cellOf("long-holds", "", StateUnsafe, []checker.Answers{lying, lying}, map[string]int{checker.MomentStaleActs: 12})},
				{Threat: "client-crash", Configured: cellOf("client-crash", "", StateNotFound, []checker.Answers{clean, clean}, nil)},
			},
			verdict: LockBroken,
			kinds:   []string{checker.MechOverlap, checker.MechDishonestRelease},
			want: []string{
				"The lock itself broke: a release deleted another client's key (once, under slow network); a release reported success on a lock it no longer held (12 times, under long holds).",
				"No evidence from client crash",
			},
			absent: []string{"The lock held"},
		},
		{
			// A stuck cell is the lock's only when the lock's answer
			// says so: a key that outlived every client (never-frees);
			// a partition that kept every client out to the end is the
			// deployment's unavailability, and the check excuses its
			// refusals, so the lock's answer stays clean.
			name: "a key that never frees, and a partition to the end",
			rows: []Row{
				{Threat: "client-crash", Configured: cellOf("client-crash", "", StateStuck, []checker.Answers{neverFrees}, map[string]int{checker.MomentHolderCrashes: 1})},
				{Threat: "partition", Configured: cellOf("partition", "", StateStuck, []checker.Answers{clean}, map[string]int{checker.MomentNodeFaults: 1})},
			},
			verdict: LockBroken,
			kinds:   []string{checker.MechNeverFrees},
			want:    []string{"The lock itself broke: the lock never frees: a key outlived every client that could hold it, and every client was refused (once, under client crash)."},
			absent:  []string{"once, under client crash and partition", "The lock held"},
		},
		{
			name: "a partition to the end alone",
			rows: []Row{
				{Threat: "partition", Configured: cellOf("partition", "", StateStuck, []checker.Answers{clean}, map[string]int{checker.MomentNodeFaults: 1})},
			},
			verdict: LockHeld,
			want:    []string{"The lock held under every threat tried: partition", "Stuck (no client could acquire) under partition."},
			absent:  []string{"The lock itself broke"},
		},
		{
			// Issue 34 item 13: an interrupted review said no mitigation
			// could be tried here; and a mitigation's cell cut short,
			// having found nothing, is no evidence that it closes the
			// threat.
			name:        "an interrupted review",
			interrupted: true,
			rows: []Row{
				{Threat: "client-pause", Configured: cellOf("client-pause", "", StateUnsafe, []checker.Answers{useLoss, clean}, map[string]int{checker.MomentStaleActs: 14}),
					Tried: []Cell{{Threat: "client-pause", Mitigation: "fencing", State: StateSkipped, Note: "the review was interrupted during this cell; its runs are kept but are no evidence"}}},
			},
			verdict: LockHeld,
			want:    []string{"Client pause: the review was interrupted before any mitigation was tried to its end."},
			absent:  []string{"not found again", "could be tried here", "no mitigation was tried"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Review{Seeds: 2, Columns: cols, Rows: tc.rows}
			r.finish(tc.interrupted)
			if r.LockVerdict != tc.verdict {
				t.Errorf("lock verdict %s, want %s", r.LockVerdict, tc.verdict)
			}
			var kinds []string
			for _, m := range r.Mechanisms {
				kinds = append(kinds, m.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("mechanisms %v, want %v", kinds, tc.kinds)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Verdict, w) {
					t.Errorf("verdict lacks %q:\n%s", w, r.Verdict)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(r.Verdict, a) {
					t.Errorf("verdict has %q:\n%s", a, r.Verdict)
				}
			}
			if !strings.Contains(r.Caveat, "not proof") || !strings.Contains(r.Caveat, "no evidence") {
				t.Errorf("caveat: %s", r.Caveat)
			}
			page, err := r.Page(t.TempDir())
			if err != nil || !strings.Contains(string(page), `id="verdict"`) || !strings.Contains(string(page), "@media print") {
				t.Fatalf("page: %v", err)
			}
			if tc.verdict == LockBroken && !strings.Contains(string(page), `id="mechanisms"`) {
				t.Error("the page has no table of the lock's mechanisms")
			}
			if strings.Contains(strings.Join(tc.want, " "), "No evidence") && !strings.Contains(string(page), `class="not-exercised"`) {
				t.Error("the page shows no cell as not exercised")
			}
		})
	}
}

// A failover threat on a system that fails over by itself is exercised
// only by a failover during a live lease: a CI run on hosts whose split
// brain promoted no replica was called "held under split brain (a server
// fault hit a node holding a live lease's key twice)". Its analog on etcd
// (a member's crash) is exercised by the fault on the node.
func TestFailoverThreatsAreExercisedByAFailover(t *testing.T) {
	cases := []struct {
		threat, system, mitigation string
		moments                    map[string]int
		want                       string
	}{
		{"split-brain", "sentinel", "", map[string]int{checker.MomentNodeFaults: 2}, StateNotExercised},
		{"split-brain", "sentinel", "", map[string]int{checker.MomentNodeFaults: 2, checker.MomentFailovers: 1}, StateNotFound},
		{"failover", "cluster", "", map[string]int{checker.MomentNodeFaults: 3}, StateNotExercised},
		{"failover", "cluster", "", map[string]int{checker.MomentFailovers: 1}, StateNotFound},
		{"split-brain", "etcd", "", map[string]int{checker.MomentNodeFaults: 2}, StateNotFound},
		{"split-brain", "etcd", "", nil, StateNotExercised},
		// A mitigation that keeps the failover's moment from happening
		// (a cut-off primary refusing grants, leases that end first)
		// counts the fault on the node; fencing does not, and needs the
		// failover.
		{"split-brain", "sentinel", "min-replicas", map[string]int{checker.MomentNodeFaults: 2}, StateNotFound},
		{"split-brain", "sentinel", "wait", map[string]int{checker.MomentNodeFaults: 2}, StateNotFound},
		{"split-brain", "sentinel", "fencing", map[string]int{checker.MomentNodeFaults: 2}, StateNotExercised},
		{"failover", "sentinel", "ttl-below-failover", map[string]int{checker.MomentNodeFaults: 2}, StateNotFound},
		// A threat that names no failover keeps its moments everywhere.
		{"server-crash", "sentinel", "", map[string]int{checker.MomentNodeFaults: 1}, StateNotFound},
	}
	for _, c := range cases {
		t.Run(c.threat+"/"+c.system+"/"+c.mitigation+"/"+fmt.Sprint(c.moments), func(t *testing.T) {
			th, ok := LookupThreat(c.threat)
			if !ok {
				t.Fatalf("no threat %s", c.threat)
			}
			var mit *Mitigation
			if c.mitigation != "" {
				m, ok := LookupMitigation(c.mitigation)
				if !ok {
					t.Fatalf("no mitigation %s", c.mitigation)
				}
				mit = &m
			}
			cell := Cell{Threat: c.threat, State: StateNotFound, Moments: th.momentsOn(c.system, mit),
				Runs: []RunRef{{Seed: 1, Answers: &clean, Exercised: c.moments}}}
			cell.answer()
			if got := cell.stateOf(false); got != c.want {
				t.Errorf("moments %v counted %v: state %s, want %s", cell.Moments, c.moments, got, c.want)
			}
		})
	}
}

// A configured cell that was skipped (the review interrupted in it, or
// the budget spent) is no evidence: it is listed in not_exercised, so that
// the documented gate (held, and nothing unexercised) fails an
// interrupted review; one that broke the lock before the interrupt still
// counts.
func TestSkippedCellsAreNotExercised(t *testing.T) {
	rows := []Row{
		{Threat: "client-crash", Configured: cellOf("client-crash", "", StateNotFound, []checker.Answers{clean, clean}, map[string]int{checker.MomentHolderCrashes: 3})},
		{Threat: "long-holds", Configured: Cell{Threat: "long-holds", State: StateSkipped, Note: "the review was interrupted during this cell; its runs are kept but are no evidence",
			Runs: []RunRef{{Seed: 1, Answers: &clean}}}},
	}
	r := &Review{Seeds: 2, Rows: rows}
	r.finish(true)
	if r.LockVerdict != LockHeld || len(r.NotExercised) != 1 || r.NotExercised[0] != "long-holds" {
		t.Errorf("lock verdict %s, not exercised %v; want held with long-holds not exercised", r.LockVerdict, r.NotExercised)
	}
	rows[1].Configured = cellOf("long-holds", "", StateUnsafe, []checker.Answers{lying}, map[string]int{checker.MomentStaleActs: 2})
	r = &Review{Seeds: 2, Rows: rows}
	r.finish(true)
	if r.LockVerdict != LockBroken || len(r.NotExercised) != 0 {
		t.Errorf("lock verdict %s, not exercised %v; want broken, none", r.LockVerdict, r.NotExercised)
	}
}
