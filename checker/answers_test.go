package checker

import (
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

func TestAnswers(t *testing.T) {
	keyLoss := []string{"kill", "clock-jump"}
	hold := func(p int, start int64, nodes ...string) Hold {
		return Hold{Key: "k", Process: p, Start: start, Token: "t" + string(rune('0'+p)), Nodes: nodes}
	}
	okRelease := func(p int, invoked, at int64) Event {
		return Event{Process: p, F: history.Release, Type: history.OK, Invoked: invoked, Time: at}
	}
	splitHold := func(p int, invoke int64, node string) Hold {
		h := hold(p, invoke+10, node)
		h.Invoke = invoke
		return h
	}
	isolate := func(start, end int64, nodes ...string) Fault {
		return Fault{Name: "isolate", Start: start, End: end, Targets: nodes}
	}
	kill := func(at int64, nodes ...string) Fault { return Fault{Name: "kill", Start: at, End: at, Targets: nodes} }
	lostUpdates := &ResourceResult{Checked: true, Valid: false, ResourceCounts: ResourceCounts{LostUpdates: 3}, Explanation: "3 lost"}
	tests := []struct {
		name                  string
		violations            []Violation
		lease                 *LeaseResult
		resource              *ResourceResult
		lock, deployment, use string
		kind, cause           string // the first mechanism (lock's) or loss
	}{
		{name: "clean", lease: &LeaseResult{Valid: true},
			lock: AnswerNotFound, deployment: AnswerNotFound, use: AnswerNotFound},
		{name: "another client's release deleted the key",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Between: []Event{okRelease(3, 150, 200)}}},
			lock:       AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "a failed release is no evidence, and nothing else explains the overlap",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300),
				Between: []Event{{Process: 3, F: history.Release, Type: history.Fail, Invoked: 150, Time: 200}}}},
			lock: AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseNoServerCause},
		{name: "a restart took the key",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{kill(200)}}},
			lock:       AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: "kill"},
		{name: "a release by the client the lost key went to is part of the loss",
			violations: []Violation{
				{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{kill(200)}},
				{First: hold(1, 100), Second: hold(3, 500), Faults: []Fault{kill(200)}, Between: []Event{okRelease(2, 400, 410)}},
			},
			lock: AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: "kill"},
		{name: "a release outweighs a fault in the window",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{kill(200)}, Between: []Event{okRelease(3, 50, 250)}}},
			lock:       AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "a release whose own lease outlived the first grant deleted only its own key (a correct release across a restart)",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{kill(200)},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 900}}}},
			lock: AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: "kill"},
		{name: "a release whose own lease ran out before the first grant (GET, then DEL)",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{kill(200)},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "a restart of a node outside the holder's majority explains nothing",
			violations: []Violation{{First: hold(1, 100, "n1", "n2", "n3"), Second: hold(2, 300, "n3", "n4", "n5"), Faults: []Fault{kill(200, "n5")}}},
			lock:       AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseNoServerCause},
		{name: "a restart of a node of the holder's majority took the key",
			violations: []Violation{{First: hold(1, 100, "n1", "n2", "n3"), Second: hold(2, 300, "n3", "n4", "n5"), Faults: []Fault{kill(200, "n3")}}},
			lock:       AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: "kill"},
		{name: "a pause is not a key loss",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{{Name: "pause", Start: 150, End: 250}}}},
			lock:       AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseNoServerCause},
		{name: "two primaries granted it",
			violations: []Violation{{First: hold(1, 100, "n1"), Second: hold(2, 300, "n2")}},
			lock:       AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: CauseFailover},
		// A split brain: the first holder's node was cut off (isolate)
		// from its acquire until the second grant, by another primary,
		// so a release in between, even a late one, took nothing there.
		{name: "two primaries granted it while the first's node was cut off, a late release in between",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n2"), Faults: []Fault{isolate(50, 400, "n1")},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: CauseFailover},
		{name: "the cut began after the first acquire: its key may have reached the second's node",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n2"), Faults: []Fault{isolate(105, 400, "n1")},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "the cut healed before the second grant",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n2"), Faults: []Fault{isolate(50, 250, "n1")},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "another node was cut off",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n2"), Faults: []Fault{isolate(50, 400, "n3")},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "a cut-off node and the same primary",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n1"), Faults: []Fault{isolate(50, 400, "n1")},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseForeignRelease},
		{name: "the cut began at the first acquire's invoke and ended at the second grant",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n2"), Faults: []Fault{isolate(100, 300, "n1")},
				Between: []Event{{Process: 3, F: history.Release, Type: history.OK, Invoked: 90, Time: 120, LeaseEnd: 95}}}},
			lock: AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: CauseFailover},
		{name: "an over-claim outweighs the cut",
			violations: []Violation{{First: splitHold(1, 100, "n1"), Second: hold(2, 300, "n2"), Faults: []Fault{isolate(50, 400, "n1")}, OverClaim: 50}},
			lock:       AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseOverClaim},
		{name: "an over-claiming holder",
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), OverClaim: 50, Faults: []Fault{kill(200)}}},
			lock:       AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverlap, cause: CauseOverClaim},
		{name: "dishonest releases",
			lease: &LeaseResult{DishonestOps: 2, Dishonesty: []Dishonest{{LeaseOp: LeaseOp{F: history.Release}}, {LeaseOp: LeaseOp{F: history.Release}}}},
			lock:  AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechDishonestRelease},
		{name: "a dishonest extend",
			lease: &LeaseResult{DishonestOps: 1, Dishonesty: []Dishonest{{LeaseOp: LeaseOp{F: history.Extend}}}},
			lock:  AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechDishonestExtend},
		{name: "an over-claim",
			lease: &LeaseResult{OverClaims: 1, OverClaimed: []OverClaim{{Margin: 5e6}}},
			lock:  AnswerUnsafe, deployment: AnswerNotFound, use: AnswerNotFound, kind: MechOverClaim},
		{name: "lost updates with no overlap are the use's", resource: lostUpdates,
			lock: AnswerNotFound, deployment: AnswerNotFound, use: AnswerUnsafe, kind: MechLostUpdate},
		{name: "lost updates behind an overlap are the overlap's", resource: lostUpdates,
			violations: []Violation{{First: hold(1, 100), Second: hold(2, 300), Faults: []Fault{kill(200)}}},
			lock:       AnswerNotFound, deployment: AnswerUnsafe, use: AnswerNotFound, kind: MechKeyLost, cause: "kill"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Results{Exclusion: &ExclusionResult{Count: len(tt.violations), Violations: tt.violations},
				Lease: tt.lease, Resource: tt.resource}
			a := answer(r, keyLoss, []string{"isolate"}, nil)
			if a.Lock != tt.lock || a.Deployment != tt.deployment || a.Use != tt.use {
				t.Fatalf("answers lock=%s deployment=%s use=%s, want %s %s %s (%+v)", a.Lock, a.Deployment, a.Use, tt.lock, tt.deployment, tt.use, a)
			}
			var first *Mechanism
			for _, ms := range [][]Mechanism{a.Mechanisms, a.Losses, a.Damage} {
				if first == nil && len(ms) > 0 {
					first = &ms[0]
				}
			}
			switch {
			case tt.kind == "" && first != nil:
				t.Fatalf("mechanism %+v, want none", *first)
			case tt.kind != "" && (first == nil || first.Kind != tt.kind || first.Cause != tt.cause):
				t.Fatalf("mechanism %+v, want kind %s cause %q", first, tt.kind, tt.cause)
			case first != nil && first.Says == "":
				t.Fatalf("mechanism %+v says nothing", *first)
			}
			if line := a.Line(); line == "" {
				t.Fatal("no summary line")
			}
		})
	}
}

// The story names the cause the mechanism counts: with a cut-off first
// node, two primaries; with an over-claim as well, the over-claim, and no
// word of two primaries.
func TestSplitBrainStoryAgreesWithTheMechanism(t *testing.T) {
	cutOff := []string{"isolate"}
	v := Violation{Key: "k",
		First:  Hold{Key: "k", Process: 1, Invoke: 100, Start: 110, Token: "a", Nodes: []string{"n1"}},
		Second: Hold{Key: "k", Process: 2, Invoke: 290, Start: 300, Token: "b", Nodes: []string{"n2"}},
		Faults: []Fault{{Name: "isolate", Start: 50, End: 400, Targets: []string{"n1"}}}}
	for _, c := range []struct {
		name       string
		overClaim  int64
		cause      string
		has, lacks string
	}{
		{"cut off", 0, CauseFailover, "Likely cause: two primaries", "over-claimed"},
		{"cut off and over-claimed", 50, CauseOverClaim, "over-claimed its validity", "two primaries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := v
			v.OverClaim = c.overClaim
			if cause, _ := classifyOverlap(&v, nil, nil, cutOff, nil); cause != c.cause {
				t.Errorf("cause %s, want %s", cause, c.cause)
			}
			checkStory(t, v.story(nil, cutOff, nil), []string{c.has}, []string{c.lacks})
		})
	}
}
