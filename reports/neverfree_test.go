package reports_test

import (
	"html"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
)

// A stored run whose holder crashed holding a key that never expired:
// checking it again (lockjepsen check DIR) finds the key outliving every
// client that could hold it, the lock's answer names the mechanism, and
// the page tells its story where the liveness shows.
func TestWriteRunShowsANeverFreeingKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-frees", "20261207T090000.000Z")
	ops := []history.Op{
		{Time: 1_000_000, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
		{Time: 1_300_000, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: "p0.1"}},
		{Time: 50_000_000, Process: history.NemesisProcess, Type: history.Info, F: "client-crash", Value: &history.Value{Phase: "start", Clients: []int{0}}},
	}
	// Process 1 is refused every 100 ms for 4 s.
	for t := int64(1e8); t <= 4e9; t += 1e8 {
		ops = append(ops, history.Op{Time: t, Process: 1, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
			history.Op{Time: t + 1e6, Process: 1, Type: history.Fail, F: history.Acquire, Key: "lock-0"})
	}
	writeRunFiles(t, dir, fixtureConfig("never-frees"), fixtureInfo(), ops)
	res, err := harness.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if nf := res.NeverFrees; nf == nil || nf.Episodes != 1 || res.Answers.Lock != checker.AnswerUnsafe ||
		res.Answers.Mechanisms[0].Kind != checker.MechNeverFrees || res.Verdict != checker.VerdictStuck {
		t.Fatalf("verdict %s, never frees %+v, answers %+v", res.Verdict, res.NeverFrees, res.Answers)
	}
	page := html.UnescapeString(writePage(t, dir, nil))
	for _, w := range []string{"The lock never frees:", "lock-0 was refused 35 times to 1 client from 0.600s to 4.000s",
		"process 0 crashed at 0.050s", "THE LOCK BROKE: the lock never frees"} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
}
