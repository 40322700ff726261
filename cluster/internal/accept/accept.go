// Package accept is the accept loop of the in-process relays of the local
// cluster (the Redis Cluster bus demuxes, the fault-injection links): one
// policy for a listener that fails or is closed.
package accept

import (
	"errors"
	"net"
	"time"
)

// retryPause is the wait after a failed Accept (EMFILE, say): retrying at
// once would spin.
const retryPause = 10 * time.Millisecond

// Each hands every connection ln accepts to take until ln is closed or take
// refuses one (its owner is closing): Each then closes that connection and
// returns.
func Each(ln net.Listener, take func(net.Conn) bool) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(retryPause)
			continue
		}
		if !take(c) {
			c.Close()
			return
		}
	}
}
