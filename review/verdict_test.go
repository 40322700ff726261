package review

import (
	"strings"
	"testing"
	"time"
)

// The verdict paragraph says what was found, what closed it, what did not,
// and never calls an absence of violations "safe".
func TestVerdictWording(t *testing.T) {
	cell := func(threat, mit, state string) Cell {
		return Cell{Threat: threat, Mitigation: mit, State: state, TimeLimit: 3 * time.Second, Runs: make([]RunRef, 2)}
	}
	r := &Review{Seeds: 2, Columns: []Column{{Name: "fencing", Title: "fencing tokens", OnResource: true},
		{Name: "wait", Title: "WAIT"}, {Name: "etcd", Title: "the etcd baseline"}}}
	r.Rows = []Row{
		{Threat: "client-pause", Configured: cell("client-pause", "", StateUnsafe), Tried: []Cell{cell("client-pause", "fencing", StateNotFound)}},
		{Threat: "client-crash", Configured: cell("client-crash", "", StateNotFound)},
		{Threat: "failover", Configured: cell("failover", "", StateUnsafe),
			Tried: []Cell{cell("failover", "wait", StateUnsafe), cell("failover", "etcd", StateNotFound)}},
		{Threat: "split-brain", Configured: cell("split-brain", "", StateUnsafe), Tried: []Cell{cell("split-brain", "wait", StateUnsafe)}},
		{Threat: "partition", Configured: cell("partition", "", StateSkipped)},
	}
	r.finish(false)
	for _, want := range []string{
		"Unsafe against client pause, failover and split brain.",
		"No violation found against client crash in 2 seeds × 3s each.",
		"Client pause: not found again with fencing tokens (on the resource).",
		"Failover: not found again with the etcd baseline; still unsafe with WAIT.",
		"Split brain: nothing tried closes it; still unsafe with WAIT.",
		"Not decided: partition (skipped).",
	} {
		if !strings.Contains(r.Verdict, want) {
			t.Errorf("verdict lacks %q:\n%s", want, r.Verdict)
		}
	}
	if strings.Contains(" "+r.Verdict, " safe against") || strings.Contains(r.Verdict, "Safe against") || !strings.Contains(r.Caveat, "not proof") {
		t.Errorf("wording: %s\n%s", r.Verdict, r.Caveat)
	}
	page, err := r.Page(t.TempDir())
	if err != nil || !strings.Contains(string(page), `id="verdict"`) || !strings.Contains(string(page), "@media print") {
		t.Fatalf("page: %v", err)
	}
}
