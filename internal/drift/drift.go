// Package drift is the one definition of the margin a lock sets aside for
// clock drift and the network, shared by the locks that subtract it from
// their validity and the checker that counts replies slower than it.
package drift

import "time"

// Margin is TTL/100 + 2 ms, as in Redis's published lock algorithm
// (Redlock): a client stops trusting its lease that long before start +
// TTL. Redis stores expiry in whole milliseconds of its wall clock, so a
// key can vanish up to a millisecond before start+TTL even on a healthy
// server; a reply slower than the margin ate into the validity its client
// was told.
func Margin(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }
