package cluster

import (
	"fmt"
	"strings"
)

// SentinelConf is a sentinel's configuration file: it monitors the primary
// at primaryHost:primaryPort with a majority quorum and announces
// announceHost:announcePort, the address other sentinels reach it at (its
// inbound link). Both hosts are IP addresses: Sentinel resolves a hostname
// (resolve-hostnames) in its event loop, on every reconnection, and a
// lookup that hangs stalls the sentinel.
func SentinelConf(spec Spec, primaryHost, primaryPort, announceHost, announcePort string) string {
	m := MasterName
	lines := []string{"# Written by lockjepsen; Sentinel rewrites this file with what it learns."}
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
