package reports_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/history"
)

// A fault the reports have never heard of, "toy-stop" on node n1, is
// drawn as what run.json says it means: a node's fault gets a bar in the
// node's lane, a client's none; one recorded without a kind (a run.json
// of before faults said) is read by its name, which says nothing of a
// client, so it is a node's.
func TestToyFaultIsDrawnAsItsRecordedMeaning(t *testing.T) {
	const bar = `class="nfault f-net"`
	cases := []struct {
		name      string
		described string
		nodeBar   bool
	}{
		{"node", `{"lock":"l","workload":"w","faults":{"toy-stop":{"description":"toy","class":"f-net","label":"toy","kind":"server"}}}`, true},
		{"client", `{"lock":"l","workload":"w","faults":{"toy-stop":{"description":"toy","class":"f-net","label":"toy","kind":"client"}}}`, false},
		{"unrecorded", `{"lock":"l","workload":"w","faults":{"toy-stop":{"description":"toy","class":"f-net","label":"toy"}}}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), c.name, "20261129T090000.000Z")
			info := fixtureInfo()
			info.Nodes = []cluster.Node{{Name: "n1", Role: "primary", Addr: "127.0.0.1:1"}}
			writeRunFiles(t, dir, fixtureConfig(c.name), info, toyOps())
			writeDescribed(t, dir, c.described)
			page := writePage(t, dir, []string{"toy-stop"})
			if got := strings.Contains(page, bar); got != c.nodeBar {
				t.Errorf("a bar in n1's lane: %v, want %v", got, c.nodeBar)
			}
		})
	}
}

// toyOps is a history with a toy fault on n1 for 1.8 s, long enough for
// its bar to show.
func toyOps() []history.Op {
	nem := func(t int64, phase, detail string) history.Op {
		return history.Op{Time: t, Process: history.NemesisProcess, Type: history.Info, F: "toy-stop",
			Value: &history.Value{Phase: phase, Targets: []string{"n1"}, Detail: detail}}
	}
	return []history.Op{
		{Time: 1000, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
		{Time: 200000, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: "p0.1", ValidUntil: history.I64(4e8)}},
		nem(1e8, "start", "a toy stops n1"),
		nem(19e8, "stop", ""),
		{Time: 29e8, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Process: 1, Value: &history.Value{TTL: 5e8}},
	}
}
