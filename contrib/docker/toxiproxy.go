package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
)

// The sentinel system's internal links on containers.
//
// The harness's in-process mesh (cluster/proxy) lives on the host's
// loopback, which processes in containers cannot reach, so the container
// backends ignore cluster.Spec.Mesh. Instead a toxiproxy server runs as a
// container on the same private network, under the hostname
// InternalHost, with one proxy "net-<name>" per node and per sentinel that
// forwards to that process (by the process's container name, which the
// toxiproxy server resolves off its event loop). Every process of the
// sentinel system is told its proxy's address, the toxiproxy container's
// IP and the proxy's port, and announces it (replica-announce-ip/port,
// sentinel announce-ip/port, replicaof and sentinel monitor name it too;
// no process resolves a name), so all of
// the cluster's own traffic into a process flows through its net-* proxy:
// a fault on net-X cuts X off from its replicas, its primary's replication
// stream and the sentinels, while clients, who reach X on its published
// loopback port, still reach it. This is the local backend's design, with
// toxiproxy's HTTP API instead of in-process links; the nemesis reaches it
// through nemesis.InternalNet (CutInternal, HealInternal).

const (
	// InternalHost is the toxiproxy server's name on the private network,
	// for people inspecting it: the processes are told and announce its
	// IP (<IP>:<port of its net-* proxy>), never this name, since
	// Sentinel resolves names in its event loop and one lookup on
	// Docker's DNS hung under load.
	InternalHost = "toxiproxy"
	// ToxiproxyAPIPort is the toxiproxy server's HTTP API port.
	ToxiproxyAPIPort = 8474
	// InternalProxyPrefix starts the name of every internal proxy.
	InternalProxyPrefix = "net-"

	// toxicUp and toxicDown are the names of the toxics this package adds
	// (at most one per direction and proxy), as in cluster/proxy.
	toxicUp   = "lockjepsen_up"
	toxicDown = "lockjepsen_down"

	// apiTimeout bounds one call to the toxiproxy API. Past it the call is
	// abandoned: toxiproxy can hang removing a toxic under traffic
	// (Shopify/toxiproxy#558), and its Go client has no timeouts.
	apiTimeout = 5 * time.Second
)

// InternalProxyName is the name of the proxy that carries the cluster's
// traffic into a node or sentinel.
func InternalProxyName(node string) string { return InternalProxyPrefix + node }

// toxicSpec is one toxic of a fault.
type toxicSpec struct {
	name, typ, stream string
	attrs             toxiproxy.Attributes
}

// toxicsFor maps a link fault to toxiproxy server toxics, the same as
// cluster/proxy does in-process: a partition is a timeout toxic of 0 in
// both directions (a black hole), reject a reset_peer, latency delays the
// replies (downstream), slow is a bandwidth limit both ways.
func toxicsFor(f proxy.Fault) ([]toxicSpec, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	both := func(typ string, attrs toxiproxy.Attributes) []toxicSpec {
		return []toxicSpec{
			{name: toxicUp, typ: typ, stream: "upstream", attrs: attrs},
			{name: toxicDown, typ: typ, stream: "downstream", attrs: attrs},
		}
	}
	switch f.Mode {
	case proxy.Partition:
		return both("timeout", toxiproxy.Attributes{"timeout": 0}), nil
	case proxy.Reject:
		return both("reset_peer", toxiproxy.Attributes{"timeout": 0}), nil
	case proxy.Latency:
		return []toxicSpec{{name: toxicDown, typ: "latency", stream: "downstream", attrs: toxiproxy.Attributes{
			"latency": f.Latency.Milliseconds(), "jitter": f.Jitter.Milliseconds(),
		}}}, nil
	case proxy.Slow:
		return both("bandwidth", toxiproxy.Attributes{"rate": f.RateKBps}), nil
	}
	return nil, fmt.Errorf("unknown fault mode %s", f)
}

// internalNet drives the toxiproxy server of one sentinel system through
// its HTTP API.
type internalNet struct {
	api string // host:port of the API, on loopback
	cli *toxiproxy.Client
	// proxies are each node's proxies by node name: one (its client port)
	// on the sentinel system, two (client port and cluster bus) on Redis
	// Cluster. A fault on a node's internal links is on the first, which
	// carries replication (and the sentinels); the others are only
	// dropped with the node, as on the local backend, where the cluster
	// bus has links of its own that only an isolation cuts.
	proxies map[string][]toxiproxy.Proxy
	// populate, if set, (re)creates the proxies on the server; nil when the
	// server's own configuration file does (compose).
	populate bool
	// restart restarts the server's container: the fallback when its API
	// does not answer in time.
	restart func(ctx context.Context) error
	// check, if set, tells waitReady whether the server's container still
	// runs (one that exited will never answer).
	check containerCheck

	mu       sync.Mutex
	faults   map[string]proxy.Fault // the fault each node's proxy has
	restarts int
}

func newInternalNet(api string, proxies map[string][]toxiproxy.Proxy, populate bool, restart func(context.Context) error) *internalNet {
	return &internalNet{
		api: api, cli: toxiproxy.NewClient(api), proxies: proxies, populate: populate, restart: restart,
		faults: map[string]proxy.Fault{},
	}
}

// call runs one API call with a deadline. toxiproxy's client takes no
// context, so a call past its deadline is abandoned (its goroutine ends
// when the server answers or goes away).
func call(ctx context.Context, what string, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("toxiproxy: %s: %w", what, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("toxiproxy: %s: no answer: %w", what, ctx.Err())
	}
}

// waitReady polls the API until it lists every proxy of the cluster,
// creating them first where this package owns them, for at most
// ReadyTimeout. The error says what was still missing (no answer, or the
// proxies the server lacks) and, if known, the container's state.
func (in *internalNet) waitReady(ctx context.Context) error {
	return pollReady(ctx, readyPoll{
		every: 50 * time.Millisecond,
		try:   in.listProxies,
		check: in.check,
		dead: func(desc string, last error) error {
			return fmt.Errorf("toxiproxy API at %s: the container is not running (%s); last answer: %w", in.api, desc, last)
		},
		late: func(waited time.Duration, desc string, last error) error {
			if in.check != nil {
				desc = " (container " + desc + ")"
			}
			return fmt.Errorf("toxiproxy API at %s not ready after %s%s: %w", in.api, waited, desc, last)
		},
	})
}

// listProxies checks that the server has every proxy of the cluster,
// creating them first where this package owns them.
func (in *internalNet) listProxies(ctx context.Context) error {
	return call(ctx, "list proxies", func() error {
		if in.populate {
			if _, err := in.cli.Populate(in.specs()); err != nil {
				return err
			}
		}
		have, err := in.cli.Proxies()
		if err != nil {
			return err
		}
		var missing []string
		for _, p := range in.specs() {
			if _, ok := have[p.Name]; !ok {
				missing = append(missing, p.Name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the server has no proxy %s", strings.Join(missing, ", "))
		}
		return nil
	})
}

func (in *internalNet) specs() []toxiproxy.Proxy {
	var out []toxiproxy.Proxy
	for _, ps := range in.proxies {
		out = append(out, ps...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// nodes are the processes with an internal proxy, sorted.
func (in *internalNet) nodes() []string {
	var out []string
	for n := range in.proxies {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// proxiesOf names node's proxies.
func (in *internalNet) proxiesOf(node string) ([]string, error) {
	ps, ok := in.proxies[node]
	if !ok {
		return nil, fmt.Errorf("%s has no internal link (the internal links are those of %s)", node, strings.Join(in.nodes(), ", "))
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out, nil
}

// faultProxy names the proxy that carries node's faults.
func (in *internalNet) faultProxy(node string) (string, error) {
	names, err := in.proxiesOf(node)
	if err != nil {
		return "", err
	}
	return names[0], nil
}

// addToxics adds a fault's toxics to one proxy.
func (in *internalNet) addToxics(ctx context.Context, name string, toxics []toxicSpec) error {
	for _, t := range toxics {
		err := call(ctx, fmt.Sprintf("add %s toxic to %s", t.typ, name), func() error {
			_, err := in.handle(name).AddToxic(t.name, t.typ, t.stream, 1, t.attrs)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// handle is a client-side proxy of the given name; the client's methods
// on it address the server's proxy by name.
func (in *internalNet) handle(name string) *toxiproxy.Proxy {
	p := in.cli.NewProxy()
	p.Name = name
	return p
}

// cut replaces the fault of node's internal proxy with f.
func (in *internalNet) cut(ctx context.Context, node string, f proxy.Fault) error {
	toxics, err := toxicsFor(f)
	if err != nil {
		return fmt.Errorf("cut %s: %w", node, err)
	}
	name, err := in.faultProxy(node)
	if err != nil {
		return fmt.Errorf("cut %s: %w", node, err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	// Recorded first: a cut that fails half-way must still be healed.
	in.faults[node] = f
	if err := in.removeToxics(ctx, name); err != nil {
		return in.recoverAfter(ctx, fmt.Errorf("cut %s: %w", node, err))
	}
	if err := in.addToxics(ctx, name, toxics); err != nil {
		return in.recoverAfter(ctx, fmt.Errorf("cut %s (%s): %w", node, f, err))
	}
	return nil
}

// heal removes every toxic this package added to node's internal proxy.
// If the server does not answer in time it is restarted (recover), which
// drops every toxic and every connection of every proxy, and the faults
// of the other nodes are applied again.
func (in *internalNet) heal(ctx context.Context, node string) error {
	name, err := in.faultProxy(node)
	if err != nil {
		return fmt.Errorf("heal %s: %w", node, err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.faults, node)
	if err := in.removeToxics(ctx, name); err != nil {
		return in.recoverAfter(ctx, fmt.Errorf("heal %s: %w", node, err))
	}
	return nil
}

// healAll heals every node.
func (in *internalNet) healAll(ctx context.Context) error {
	var errs []error
	for _, n := range in.nodes() {
		errs = append(errs, in.heal(ctx, n))
	}
	return errors.Join(errs...)
}

// removeToxics removes the toxics of ours that a proxy has.
func (in *internalNet) removeToxics(ctx context.Context, name string) error {
	var have toxiproxy.Toxics
	err := call(ctx, "list the toxics of "+name, func() error {
		var err error
		have, err = in.handle(name).Toxics()
		return err
	})
	if err != nil {
		return err
	}
	for _, t := range have {
		if t.Name != toxicUp && t.Name != toxicDown {
			continue
		}
		if err := call(ctx, fmt.Sprintf("remove toxic %s from %s", t.Name, name), func() error {
			return in.handle(name).RemoveToxic(t.Name)
		}); err != nil {
			return err
		}
	}
	return nil
}

// recoverAfter falls back, after a failed API call, to restarting the
// server and applying the faults still wanted (in.faults) to the fresh
// proxies. It returns nil if that worked: the faults are then as asked,
// at the price of every internal connection being dropped once (which
// the processes see as a network blip, and reconnect). Called with in.mu
// held.
func (in *internalNet) recoverAfter(ctx context.Context, cause error) error {
	if in.restart == nil {
		return cause
	}
	ctx = context.WithoutCancel(ctx)
	if err := in.restart(ctx); err != nil {
		return fmt.Errorf("%w; restarting the toxiproxy server then failed: %v", cause, err)
	}
	in.restarts++
	if err := in.waitReady(ctx); err != nil {
		return fmt.Errorf("%w; after restarting the toxiproxy server: %v", cause, err)
	}
	// The server's own configuration, or ours, has healthy proxies now;
	// a configuration file can still carry toxics of its own.
	var errs []error
	for _, p := range in.specs() {
		errs = append(errs, in.removeToxics(ctx, p.Name))
	}
	for n, f := range in.faults {
		toxics, _ := toxicsFor(f)
		name, _ := in.faultProxy(n)
		errs = append(errs, in.addToxics(ctx, name, toxics))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w; after restarting the toxiproxy server: %v", cause, err)
	}
	return nil
}

// forceRecover restarts the server as a failed call would (for tests of
// the fallback).
func (in *internalNet) forceRecover(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.recoverAfter(ctx, errors.New("forced"))
}

// leftovers lists the toxics (of any name) on the internal proxies, as
// "proxy/toxic".
func (in *internalNet) leftovers(ctx context.Context) ([]string, error) {
	var out []string
	for _, p := range in.specs() {
		name := p.Name
		var have toxiproxy.Toxics
		if err := call(ctx, "list the toxics of "+name, func() error {
			var err error
			have, err = in.handle(name).Toxics()
			return err
		}); err != nil {
			return nil, err
		}
		for _, t := range have {
			out = append(out, name+"/"+t.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// resetState removes every toxic of every proxy on the server (compose:
// what an interrupted earlier run left).
func (in *internalNet) resetState(ctx context.Context) error {
	return call(ctx, "reset", in.cli.ResetState)
}
