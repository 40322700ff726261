package harness_test

import (
	"encoding/json"
	"syscall"
)

func pidsIn(nodesJSON string) []int {
	var nodes []struct {
		PID int `json:"pid"`
	}
	json.Unmarshal([]byte(nodesJSON), &nodes)
	var out []int
	for _, n := range nodes {
		out = append(out, n.PID)
	}
	return out
}

// processAlive is true for a live, non-zombie process.
func processAlive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }
