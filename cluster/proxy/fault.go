// Package proxy puts an in-process toxiproxy proxy on every network link of a
// test cluster (client→node, later node→node), so that the nemesis can cut,
// reset, delay or throttle one link at a time while every other link keeps
// working.
//
// Each Link has two layers:
//
//	client ──► front listener (Link.Addr, owned by this package)
//	       ──► toxiproxy proxy (127.0.0.1:0, replaceable) ──► upstream
//
// Toxics live in the toxiproxy proxy. The thin front layer exists only so
// that this package owns the sockets clients hold: toxiproxy can wedge while
// removing a toxic under traffic (Shopify/toxiproxy#558, #412), and once it
// has, neither RemoveToxic nor Proxy.Stop is guaranteed to return or to
// close the client sockets. With the front layer a stuck toxiproxy proxy is
// simply abandoned: the link's client connections are closed, a fresh
// toxiproxy proxy is started behind the same front address, and clients
// reconnect to a healthy link.
package proxy

import (
	"errors"
	"fmt"
	"time"
)

// Mode is the kind of fault a link suffers.
type Mode string

const (
	// Partition is a black hole in both directions: connections are
	// accepted (the front listener is ours), but no byte gets through, so
	// requests get no answer and callers time out. Healing closes the
	// connections that were open during the partition (toxiproxy closes the
	// stubs of a removed timeout toxic), so clients reconnect.
	Partition Mode = "partition"
	// Reject resets connections as soon as they carry data (toxiproxy's
	// reset_peer toxic with timeout 0, both directions). A client gets a
	// prompt "connection reset by peer" or EOF on its next request instead
	// of a timeout, which is what a crashed peer or a firewall REJECT looks
	// like. Connecting itself still succeeds: the failure shows on the first
	// request.
	Reject Mode = "reject"
	// Latency delays the reply direction (node→client, toxiproxy's
	// "downstream") by Latency±Jitter per chunk; requests travel
	// undelayed, so a request/response round trip is slowed by one delay.
	Latency Mode = "latency"
	// Slow limits bandwidth to RateKBps (1 KB = 1000 bytes) in each
	// direction.
	Slow Mode = "slow"
	// ReplyLoss drops the reply direction only (node→client, toxiproxy's
	// timeout toxic with timeout 0 on "downstream"): requests reach the
	// server and are applied, but their replies vanish, and the connection
	// stays open, so callers time out not knowing what the server did.
	// Healing closes the connections that were open, as for Partition: the
	// replies lost put each stream out of step with its requests, and a
	// client must reconnect.
	ReplyLoss Mode = "reply-loss"
)

// Fault is what a link suffers.
type Fault struct {
	Mode Mode
	// Latency and Jitter are for Latency only. The delay of each chunk is
	// uniform in [Latency-Jitter, Latency+Jitter); toxiproxy works in whole
	// milliseconds, so both are truncated to milliseconds.
	Latency, Jitter time.Duration
	// RateKBps is for Slow only.
	RateKBps int64
}

// String renders the fault for histories and logs, e.g. "partition",
// "latency 200ms±50ms", "slow 50KB/s".
func (f Fault) String() string {
	switch f.Mode {
	case Latency:
		if f.Jitter != 0 {
			return fmt.Sprintf("latency %v±%v", f.Latency, f.Jitter)
		}
		return fmt.Sprintf("latency %v", f.Latency)
	case Slow:
		return fmt.Sprintf("slow %dKB/s", f.RateKBps)
	case Partition, Reject, ReplyLoss:
		return string(f.Mode)
	default:
		return fmt.Sprintf("%q", string(f.Mode))
	}
}

// Validate reports why a fault cannot be applied. Parameters that do not
// belong to the mode are rejected rather than ignored, because a stray
// Latency on a partition is almost certainly a caller bug.
func (f Fault) Validate() error {
	if f.Latency < 0 || f.Jitter < 0 {
		return fmt.Errorf("fault %s: negative latency or jitter", f)
	}
	if f.RateKBps < 0 {
		return fmt.Errorf("fault %s: negative rate", f)
	}
	switch f.Mode {
	case Partition, Reject, ReplyLoss:
		if f.Latency != 0 || f.Jitter != 0 || f.RateKBps != 0 {
			return fmt.Errorf("fault %s takes no latency, jitter or rate", f)
		}
	case Latency:
		if f.RateKBps != 0 {
			return fmt.Errorf("fault %s takes no rate", f)
		}
		if f.Latency < time.Millisecond {
			return fmt.Errorf("fault %s: latency must be at least 1ms (toxiproxy has millisecond resolution)", f)
		}
		if f.Jitter > f.Latency {
			return fmt.Errorf("fault %s: jitter must not exceed latency", f)
		}
	case Slow:
		if f.Latency != 0 || f.Jitter != 0 {
			return fmt.Errorf("fault %s takes no latency or jitter", f)
		}
		if f.RateKBps == 0 {
			return errors.New("fault slow: rate must be positive")
		}
	default:
		return fmt.Errorf("unknown fault mode %s (want partition, reject, reply-loss, latency or slow)", f)
	}
	return nil
}

// toxic is one toxiproxy toxic that implements (half of) a fault.
type toxic struct {
	name, typ, stream string
	attrs             map[string]int64
}

// Toxic names are fixed per direction: a link carries at most one fault, so
// at most one toxic per direction.
const (
	toxicUp   = "lockjepsen_up"
	toxicDown = "lockjepsen_down"
)

func (f Fault) toxics() []toxic {
	both := func(typ string, attrs map[string]int64) []toxic {
		return []toxic{
			{name: toxicUp, typ: typ, stream: "upstream", attrs: attrs},
			{name: toxicDown, typ: typ, stream: "downstream", attrs: attrs},
		}
	}
	switch f.Mode {
	case Partition:
		return both("timeout", map[string]int64{"timeout": 0})
	case Reject:
		return both("reset_peer", map[string]int64{"timeout": 0})
	case ReplyLoss:
		return []toxic{{name: toxicDown, typ: "timeout", stream: "downstream", attrs: map[string]int64{"timeout": 0}}}
	case Latency:
		return []toxic{{name: toxicDown, typ: "latency", stream: "downstream", attrs: map[string]int64{
			"latency": f.Latency.Milliseconds(),
			"jitter":  f.Jitter.Milliseconds(),
		}}}
	case Slow:
		return both(slowToxicType, map[string]int64{"rate": f.RateKBps})
	}
	return nil
}
