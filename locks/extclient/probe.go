package extclient

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// Description is what a client declares in its init_ok.
type Description struct {
	Name         string
	Capabilities []string
	// Systems as declared; see Systems and RunsOn for what none means.
	Systems []string
}

// described caches the description of each command line that started:
// a run validates its configuration more than once, and a review plans
// many runs of one client; a client that failed to start is probed again.
var described sync.Map // argv joined by NUL -> Description

// silent remembers the command lines that never answered the handshake
// within the start timeout: a run validates its configuration more than
// once, and each probe waited the whole timeout again (60 s of silence
// before a run of `--client 'sleep 1000'` failed). Launch fails at once
// for them too.
var silent sync.Map // argv joined by NUL -> the probe's error

// Describe starts a client once, outside any run, to read what its
// init_ok declares (a review runs its renewal threats only on a client
// that can extend, and every run only on a system the client declares).
// The client is handed one node on a loopback port nothing listens on
// and no system, since the handshake needs no server; a client that
// dials at init fails the probe, and the caller then assumes nothing
// about it.
func Describe(ctx context.Context, argv []string, ttl time.Duration) (Description, error) {
	key := strings.Join(argv, "\x00")
	if d, ok := described.Load(key); ok {
		return d.(Description), nil
	}
	if err, ok := silent.Load(key); ok {
		return Description{}, err.(error)
	}
	o := Options{Argv: argv, OpTimeout: time.Second, TTL: ttl}
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout())
	defer cancel()
	c, err := Start(ctx, o, []Node{{Name: "n1", Addr: "127.0.0.1:1"}}, 0)
	if errors.Is(err, context.DeadlineExceeded) {
		silent.Store(key, err)
	}
	if err != nil {
		return Description{}, err
	}
	defer c.Close()
	d := Description{Name: c.impl, Capabilities: append([]string(nil), c.caps...), Systems: append([]string(nil), c.systems...)}
	described.Store(key, d)
	return d, nil
}

// Probe is Describe's capabilities and name.
func Probe(ctx context.Context, argv []string, ttl time.Duration) (capabilities []string, name string, err error) {
	d, err := Describe(ctx, argv, ttl)
	return d.Capabilities, d.Name, err
}
