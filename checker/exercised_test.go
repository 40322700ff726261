package checker

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/history"
)

// nodes records that the latest event (an ok acquire) was granted by ns.
func (b *hb) nodes(ns ...string) *hb {
	b.events[len(b.events)-1].Value.Nodes = ns
	return b
}

// held is process 1 granted k at 10 ms, its lease (TTL 1 s) valid until
// vuMs.
func held(vuMs int64) *hb { return new(hb).acquire(1, "k", 0, 10, ok, "a", vuMs) }

// exercisedCases are each moment in one history that has it and one that
// just misses it. The test helpers' acquires and extends ask for a 1 s
// TTL: the drift margin is 12 ms.
var exercisedCases = []struct {
	name string
	b    *hb
	want Exercised
}{
	// stale_acts
	{"stale: write, extend and release after the lease ran out", held(100).
		write(1, "k", 120, 125, ok, 1, nil).extend(1, "k", 130, 135, ok, "a", 400).release(1, "k", 150, 160, ok, "a"),
		Exercised{StaleActs: 3}},
	{"stale: past invoke + TTL though the lock claimed longer", held(5000).release(1, "k", 1500, 1510, ok, "a"),
		Exercised{StaleActs: 1}},
	{"not stale: released just before expiry", held(100).write(1, "k", 50, 55, ok, 1, nil).release(1, "k", 99, 105, ok, "a"),
		Exercised{}},
	{"not stale: an extend moved the deadline", held(100).extend(1, "k", 50, 55, ok, "a", 500).release(1, "k", 300, 305, ok, "a"),
		Exercised{}},
	{"not stale: no deadline claimed", held(-1).release(1, "k", 5000, 5010, ok, "a"), Exercised{}},
	{"not stale: another key's release", held(100).release(1, "other", 150, 160, ok, "b"), Exercised{}},
	// stale_grants
	{"stale grant: another client granted while the stale holder has not released", held(100).
		acquire(2, "k", 150, 160, ok, "b", 1000).release(1, "k", 200, 210, ok, "a"),
		Exercised{StaleGrants: 1, StaleActs: 1}},
	{"no stale grant: the holder released in time", held(100).release(1, "k", 90, 95, ok, "a").
		acquire(2, "k", 150, 160, ok, "b", 1000), Exercised{}},
	{"no stale grant: the stale holder crashed first", held(100).crash(120, 1).
		acquire(2, "k", 150, 160, ok, "b", 1000), Exercised{}},
	{"no stale grant: the holder was told it lost the lock", held(100).extend(1, "k", 50, 60, fail, "a", 0).
		acquire(2, "k", 150, 160, ok, "b", 1000), Exercised{}},
	// across_grants
	{"across: a release in flight over another's grant", held(100).release(1, "k", 90, 170, info, "a").
		acquire(2, "k", 150, 160, ok, "b", 1000), Exercised{AcrossGrants: 1}},
	{"across: an extend in flight over another's grant", held(100).extend(1, "k", 50, 170, fail, "a", 0).
		acquire(2, "k", 150, 160, ok, "b", 1000), Exercised{AcrossGrants: 1, StaleGrants: 1, AcrossExpiry: 1}},
	{"not across: the release came back before the grant", held(100).release(1, "k", 90, 95, ok, "a").
		acquire(2, "k", 150, 160, ok, "b", 1000), Exercised{}},
	{"not across: the grant was of another key", held(100).release(1, "k", 90, 170, info, "a").
		acquire(2, "other", 150, 160, ok, "b", 1000), Exercised{}},
	// extends_across_expiry
	{"across expiry: an extend sent before the deadline, answered at it", held(100).extend(1, "k", 90, 100, ok, "a", 1090),
		Exercised{AcrossExpiry: 1}},
	{"across expiry: whatever its outcome", held(100).extend(1, "k", 90, 101, info, "a", 0),
		Exercised{AcrossExpiry: 1}},
	{"not across expiry: answered just before the deadline", held(100).extend(1, "k", 90, 99, ok, "a", 1090), Exercised{}},
	{"not across expiry: sent at the deadline (a stale act)", held(100).extend(1, "k", 100, 105, ok, "a", 1100),
		Exercised{StaleActs: 1}},
	{"not across expiry: another process's extend", held(100).extend(2, "k", 90, 100, ok, "b", 1090), Exercised{}},
	// slow_replies
	{"slow: a grant and an extend each 13 ms", new(hb).acquire(1, "k", 0, 13, ok, "a", 1000).
		extend(1, "k", 20, 33, ok, "a", 1000), Exercised{SlowReplies: 2}},
	{"not slow: 12 ms, and a slow refusal", new(hb).acquire(1, "k", 0, 12, ok, "a", 1000).
		acquire(2, "k", 0, 500, fail, "", 0), Exercised{}},
	// node_faults_on_live_lease
	{"node fault: a kill while one Redis holds a live lease", held(1000).fault(100, "kill", "start", "n1"),
		Exercised{NodeFaults: 1}},
	{"node fault: a pause on one of the Redlock majority, counted once for two leases", held(1000).nodes("n1", "n2", "n3").
		acquire(2, "k2", 0, 10, ok, "b", 1000).nodes("n2", "n4", "n5").fault(100, "pause", "start", "n2"),
		Exercised{NodeFaults: 1}},
	{"no node fault: the lease had expired", held(1000).fault(1200, "kill", "start", "n1"), Exercised{}},
	{"no node fault: the lease was released", held(1000).release(1, "k", 50, 60, ok, "a").fault(100, "kill", "start", "n1"), Exercised{}},
	{"no node fault: a node outside the grant's", held(1000).nodes("n1", "n3", "n5").fault(100, "kill", "start", "n2"), Exercised{}},
	{"no node fault: a stop, and a client's fault", held(1000).fault(100, "kill", "stop", "n1").
		ev(110, history.NemesisProcess, history.Info, "client-pause", "", &history.Value{Phase: "start", Targets: []string{"worker-1"}, Clients: []int{1}}),
		Exercised{}},
	// failovers_on_live_lease
	{"failover: the primary moved while its lease was live", new(hb).primary(0, "n1").
		acquire(1, "k", 0, 10, ok, "a", 1000).nodes("n1").primary(100, "n2"), Exercised{Failovers: 1}},
	{"failover: asked for with no monitor", held(1000).fault(100, "failover", "start"), Exercised{Failovers: 1}},
	{"failover: asked for and seen by the monitor counts once", new(hb).primary(0, "n1").
		acquire(1, "k", 0, 10, ok, "a", 1000).fault(100, "failover", "start").primary(150, "n2"), Exercised{Failovers: 1}},
	{"no failover: the lease had expired", new(hb).primary(0, "n1").
		acquire(1, "k", 0, 10, ok, "a", 1000).nodes("n1").primary(1500, "n2"), Exercised{}},
	{"no failover: the monitor named the same primary again", new(hb).primary(0, "n1").
		acquire(1, "k", 0, 10, ok, "a", 1000).primary(100, "n1"), Exercised{}},
	// holder_crashes
	{"holder crash: counted once for two holders", held(1000).acquire(2, "k2", 0, 10, ok, "b", 1000).crash(100, 1, 2),
		Exercised{HolderCrashes: 1}},
	{"no holder crash: the lease had expired", held(1000).crash(1500, 1), Exercised{}},
	{"no holder crash: after the release, and of a client holding nothing", held(1000).
		release(1, "k", 50, 60, ok, "a").crash(100, 1, 2), Exercised{}},
	{"no holder crash: the grant reached a crashed client", new(hb).acquire(1, "k", 0, 20, ok, "a", 1000).
		crash(5, 1).crash(100, 1), Exercised{SlowReplies: 1}},
	// moved_client_acquires (client-clock-offset is a client clock fault
	// in momentOptions)
	{"moved client: asked for a key another client held live", held(1000).clientClock(5, "start", 2).
		acquire(2, "k", 100, 110, fail, "", 0), Exercised{MovedClientAcquires: 1}},
	{"moved client: granted over another's live lease (an overlap), counted at its invoke and its grant", held(1000).clientClock(5, "start", 2).
		acquire(2, "k", 100, 110, ok, "b", 1000), Exercised{MovedClientAcquires: 2}},
	{"moved holder: another client granted over its live lease", new(hb).clientClock(0, "start", 1).
		acquire(1, "k", 1, 10, ok, "a", 1000).acquire(2, "k", 100, 110, ok, "b", 1000), Exercised{MovedClientAcquires: 1}},
	{"no moved client: the lease had expired", held(1000).clientClock(5, "start", 2).
		acquire(2, "k", 1200, 1210, ok, "b", 2000), Exercised{StaleGrants: 1}},
	{"no moved client: its fault had stopped", held(1000).clientClock(5, "start", 2).clientClock(50, "stop", 2).
		acquire(2, "k", 100, 110, fail, "", 0), Exercised{}},
	{"no moved client: another client's clock was moved", held(1000).clientClock(5, "start", 3).
		acquire(2, "k", 100, 110, fail, "", 0), Exercised{}},
	{"no moved client: a server clock fault", held(1000).fault(50, "clock-jump", "start", "n1").
		acquire(2, "k", 100, 110, fail, "", 0), Exercised{NodeFaults: 1}},
	// grants_on_moved_clock
	{"moved clock grant: one Redis offset from before the grant", new(hb).fault(0, "clock-offset", "start", "n1").
		acquire(1, "k", 1, 10, ok, "a", 1000), Exercised{MovedClockGrants: 1}},
	{"moved clock grant: a Redlock grant with one node moved", new(hb).fault(0, "clock-jump", "start", "n2").
		acquire(1, "k", 1, 10, ok, "a", 1000).nodes("n1", "n2", "n3"), Exercised{MovedClockGrants: 1}},
	{"no moved clock grant: a node outside the grant's", new(hb).fault(0, "clock-offset", "start", "n2").
		acquire(1, "k", 1, 10, ok, "a", 1000).nodes("n1", "n3", "n5"), Exercised{}},
	{"no moved clock grant: the clock was back", new(hb).fault(0, "clock-jump", "start", "n1").fault(1, "clock-jump", "stop", "n1").
		acquire(1, "k", 1, 10, ok, "a", 1000), Exercised{}},
	{"no moved clock grant: not a clock fault", new(hb).fault(0, "pause", "start", "n1").
		acquire(1, "k", 1, 10, ok, "a", 1000), Exercised{}},
}

// momentOptions name the clock faults the moment cases use.
var momentOptions = Options{ClockFaults: []string{"clock-jump", "clock-offset"}, ClientClockFaults: []string{"client-clock-offset"}}

// clientClock adds a client clock fault's event on client processes.
func (b *hb) clientClock(t int64, phase string, procs ...int) *hb {
	var targets []string
	for _, p := range procs {
		targets = append(targets, "client "+strconv.Itoa(p))
	}
	return b.ev(t, history.NemesisProcess, history.Info, "client-clock-offset", "", &history.Value{Phase: phase, Targets: targets, Clients: procs})
}

func TestExercisedMoments(t *testing.T) {
	for _, c := range exercisedCases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.b.build(t), momentOptions)
			if r.Exercised == nil || *r.Exercised != c.want {
				t.Fatalf("exercised %+v, want %+v", r.Exercised, c.want)
			}
		})
	}
}

// Every run's results say what was exercised, zeros included, under the
// names review/ and results.json readers use.
func TestExercisedInResults(t *testing.T) {
	r := Check(held(100).release(1, "k", 150, 160, ok, "a").build(t), Options{})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Exercised map[string]int `json:"exercised"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, m := range ExercisedMoments() {
		n, ok := got.Exercised[m.Name]
		if !ok {
			t.Errorf("results.json has no %s", m.Name)
		}
		if want := map[string]int{MomentStaleActs: 1}[m.Name]; n != want {
			t.Errorf("%s: %d, want %d", m.Name, n, want)
		}
	}
}

// The summary says what was exercised just after the answers, and says so
// when nothing dangerous happened.
func TestSummaryExercisedLine(t *testing.T) {
	cases := []struct {
		name string
		b    *hb
		want string
	}{
		{"a stale holder", held(100).release(1, "k", 150, 160, ok, "a"), "a stale holder acted once"},
		{"nothing dangerous", held(100).release(1, "k", 50, 60, ok, "a"), "a safe verdict here is no evidence"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.b.build(t), Options{})
			lines := r.Summary()
			i := slices.Index(lines, r.Answers.Line())
			if i < 0 || i+1 >= len(lines) || lines[i+1] != r.Exercised.SummaryLine() || !strings.Contains(lines[i+1], c.want) {
				t.Fatalf("want the exercised line saying %q after the answers:\n%s", c.want, strings.Join(lines, "\n"))
			}
		})
	}
	r := Check(held(100).build(t), Options{})
	r.Exercised = nil // a run stored before moments were counted
	for _, l := range r.Summary() {
		if strings.HasPrefix(l, "exercised:") {
			t.Fatalf("a run without counts says %q", l)
		}
	}
}
