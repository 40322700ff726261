package extclient

import (
	"context"
	"time"
)

// Probe starts a client once, outside any run, to read the capabilities
// its init_ok declares (a review runs its renewal threats only on a
// client that can extend). The client is handed one node on a loopback
// port nothing listens on, since the handshake needs no server; a client
// that dials at init fails the probe, and the caller then assumes
// nothing about it.
func Probe(ctx context.Context, argv []string, ttl time.Duration) (capabilities []string, name string, err error) {
	o := Options{Argv: argv, OpTimeout: time.Second, TTL: ttl}
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout())
	defer cancel()
	c, err := Start(ctx, o, []Node{{Name: "n1", Addr: "127.0.0.1:1"}}, 0)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	return append([]string(nil), c.caps...), c.impl, nil
}
