package nemesis

import (
	"slices"
	"testing"
)

// The faults that make a node slow, silent or erroring are the server and
// link faults, by kind: the never-frees check excuses refusals under them
// and lets an unknown outcome take effect until they end. Clock faults
// (excused by their own rule) and client faults are not among them, nor
// are the faults that touch only replies (latency, reply loss), whose
// requests the servers apply on time.
func TestDisruptFaults(t *testing.T) {
	got := DisruptFaults()
	for _, name := range []string{Pause, Kill, Partition, Slow, Reject, Isolate} {
		if !slices.Contains(got, name) {
			t.Errorf("%s is not a disrupting fault: %v", name, got)
		}
	}
	for _, name := range append([]string{ClientPause, ClientCrash, Latency, ReplyLoss}, ClockFaults()...) {
		if slices.Contains(got, name) {
			t.Errorf("%s is a disrupting fault: %v", name, got)
		}
	}
}
