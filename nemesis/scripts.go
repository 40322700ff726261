package nemesis

import (
	"fmt"
	"sort"
	"time"
)

// ScriptParams are what a named script is built from.
type ScriptParams struct {
	Nodes     []string
	Clients   int
	TTL       time.Duration
	TimeLimit time.Duration
	Interval  time.Duration
	Duration  time.Duration
	ClockJump time.Duration
}

// Script is a named schedule of timed steps, for scenarios from the
// literature that a random schedule would hit only by chance.
type Script struct {
	Name        string
	Description string
	// Check refuses parameters the script cannot work with.
	Check func(p ScriptParams) error
	Build func(p ScriptParams) []Step
}

// Scripts are the named scripts, by name.
var Scripts = map[string]Script{
	"kleppmann-clock-jump": {
		Name: "kleppmann-clock-jump",
		Description: "Kleppmann's Redlock counterexample: client 0 is cut off from n4 and n5 and can lock only n1-n3; " +
			"client 1 is cut off from n1 and n2 and can lock only n3-n5; n3's clock jumps forward again and again, " +
			"so its key expires under client 0 and client 1 gets its majority",
		Check: func(p ScriptParams) error {
			if len(p.Nodes) != 5 || p.Clients < 2 {
				return fmt.Errorf("needs 5 nodes and at least 2 clients, got %d nodes and %d clients", len(p.Nodes), p.Clients)
			}
			if p.ClockJump <= 0 {
				return fmt.Errorf("needs a forward --clock-jump, got %s", p.ClockJump)
			}
			return nil
		},
		Build: func(p ScriptParams) []Step {
			n := p.Nodes
			steps := []Step{
				{At: 0, Action: Action{Fault: Partition, Nodes: []string{n[3], n[4]}, Clients: []int{0}, For: p.TimeLimit}},
				{At: 0, Action: Action{Fault: Partition, Nodes: []string{n[0], n[1]}, Clients: []int{1}, For: p.TimeLimit}},
			}
			for t := p.Interval; t+p.Duration < p.TimeLimit; t += p.Interval + p.Duration {
				steps = append(steps, Step{At: t, Action: Action{Fault: ClockJump, Nodes: []string{n[2]}, For: p.Duration, Offset: p.ClockJump}})
			}
			return steps
		},
	},
}

// ScriptNames is the sorted list of script names.
func ScriptNames() []string {
	var out []string
	for n := range Scripts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
