package cluster

import (
	"fmt"
	"strings"
)

// SentinelConf is a sentinel's configuration file: it monitors the primary
// at primaryHost:primaryPort with a majority quorum and announces
// announceHost:announcePort, the address other sentinels reach it at (its
// inbound link). Backends whose processes know each other by name set
// hostnames, so that the sentinels resolve and report names, not addresses.
func SentinelConf(spec Spec, primaryHost, primaryPort, announceHost, announcePort string, hostnames bool) string {
	m := MasterName
	lines := []string{"# Written by lockjepsen; Sentinel rewrites this file with what it learns."}
	if hostnames {
		lines = append(lines, "sentinel resolve-hostnames yes", "sentinel announce-hostnames yes")
	}
	lines = append(lines,
		fmt.Sprintf("sentinel monitor %s %s %s %d", m, primaryHost, primaryPort, spec.Sentinels/2+1),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", m, spec.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", m, spec.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", m),
		"sentinel announce-ip "+announceHost,
		"sentinel announce-port "+announcePort,
	)
	return strings.Join(lines, "\n") + "\n"
}
