package reports_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/history"
)

// Faults are drawn as run.json says, whoever wrote it: a run.json of
// before faults said how to draw them (a bare string a fault) is drawn as
// reports drew it then, a newer one with the class and label it recorded,
// and one naming a class the style sheet lacks gets the neutral colour.
func TestFaultsAreDrawnAsTheRunRecorded(t *testing.T) {
	cases := []struct {
		name      string
		described string // run.json's "described"; empty for none
		want, not []string
	}{
		{"undescribed", "",
			[]string{`class="nfault f-process"`, ">paused</text>", `class="nfault f-clock"`, ">clock +1.500s</text>"}, nil},
		{"old-strings", `{"lock":"l","workload":"w","faults":{"pause":"frozen, in old words","clock-jump":"jumps"}}`,
			[]string{"pause: frozen, in old words", `class="nfault f-process"`, ">paused</text>", ">clock +1.500s</text>"}, nil},
		{"recorded", `{"lock":"l","workload":"w","faults":{
			"pause":{"description":"frozen","class":"f-net","label":"stopped"},
			"clock-jump":{"description":"jumps","class":"f-other","label":"clock","label_detail":true}}}`,
			[]string{"pause: frozen", `class="nfault f-net"`, ">stopped</text>", `class="nfault f-other"`, ">clock +1.500s</text>"},
			[]string{`class="nfault f-process"`, `class="nfault f-clock"`, ">paused</text>"}},
		{"hostile", `{"lock":"l","workload":"w","faults":{"pause":{"description":"d","class":"f-net\" onload=\"x","label":"<evil>"}}}`,
			[]string{`class="nfault f-other"`, "&lt;evil&gt;"}, []string{"onload", "<evil>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), c.name, "20261129T090000.000Z")
			cfg := fixtureConfig(c.name)
			cfg.Nemesis = []string{"pause", "clock-jump"}
			info := fixtureInfo()
			info.Nodes = []cluster.Node{{Name: "n1", Role: "primary", Addr: "127.0.0.1:1"}, {Name: "n2", Role: "primary", Addr: "127.0.0.1:2"}}
			writeRunFiles(t, dir, cfg, info, faultOps())
			if c.described != "" {
				writeDescribed(t, dir, c.described)
			}
			page := writePage(t, dir, c.want)
			for _, n := range c.not {
				if strings.Contains(page, n) {
					t.Errorf("the page has %q", n)
				}
			}
		})
	}
}

// writeDescribed puts described, raw, into the run's run.json: an old
// harness wrote what today's types would not.
func writeDescribed(t *testing.T, dir, described string) {
	t.Helper()
	path := filepath.Join(dir, harness.RunInfoFile)
	var info map[string]json.RawMessage
	if err := json.Unmarshal([]byte(readFile(t, path)), &info); err != nil {
		t.Fatal(err)
	}
	info["described"] = json.RawMessage(described)
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// faultOps is a history with a long pause on n1 and a clock jump on n2,
// long enough for their bars to carry labels.
func faultOps() []history.Op {
	nem := func(t int64, f, phase, node, detail string) history.Op {
		return history.Op{Time: t, Process: history.NemesisProcess, Type: history.Info, F: f,
			Value: &history.Value{Phase: phase, Targets: []string{node}, Detail: detail}}
	}
	return []history.Op{
		{Time: 1000, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Value: &history.Value{TTL: 5e8}},
		{Time: 200000, Type: history.OK, F: history.Acquire, Key: "lock-0", Value: &history.Value{Token: "p0.1", ValidUntil: history.I64(4e8)}},
		nem(1e8, "pause", "start", "n1", "SIGSTOP for 1.8s"),
		nem(2e8, "clock-jump", "start", "n2", "wall clock +1.500s for 1.6s"),
		nem(18e8, "clock-jump", "stop", "n2", ""),
		nem(19e8, "pause", "stop", "n1", ""),
		{Time: 29e8, Type: history.Invoke, F: history.Acquire, Key: "lock-0", Process: 1, Value: &history.Value{TTL: 5e8}},
	}
}

// The harness records in run.json how each of the run's faults is drawn,
// and the page draws them so.
func TestRealRunsRecordHowFaultsAreDrawn(t *testing.T) {
	for _, r := range realRuns(t) {
		t.Run(r.name, func(t *testing.T) {
			var info harness.RunInfo
			if err := json.Unmarshal([]byte(readFile(t, filepath.Join(r.dir, harness.RunInfoFile))), &info); err != nil {
				t.Fatal(err)
			}
			if info.Described == nil || len(info.Described.Faults) == 0 {
				t.Fatalf("run.json describes no fault: %+v", info.Described)
			}
			for name, fd := range info.Described.Faults {
				if fd.Description == "" || fd.Class == "" {
					t.Errorf("%s is recorded without words or colour: %+v", name, fd)
				}
			}
		})
	}
}
