package nemesis

import (
	"slices"
	"testing"
)

// The faults that make a node slow, silent or erroring are the server and
// link faults, by kind: the never-frees check excuses refusals under them
// and lets an unknown outcome take effect until they end. Clock faults
// (excused by their own rule) and client faults are not among them.
func TestDisruptFaults(t *testing.T) {
	got := DisruptFaults()
	for _, name := range []string{Pause, Kill, Partition, Latency, Slow, Reject, Isolate} {
		if !slices.Contains(got, name) {
			t.Errorf("%s is not a disrupting fault: %v", name, got)
		}
	}
	for _, name := range append([]string{ClientPause, ClientCrash}, ClockFaults()...) {
		if slices.Contains(got, name) {
			t.Errorf("%s is a disrupting fault: %v", name, got)
		}
	}
}
