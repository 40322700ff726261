package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/lockjepsen/lockjepsen/cluster/proxy"
)

// netFault cuts or degrades the proxied links of the target nodes: every
// link into a target node (from clients and from other nodes) and every
// link out of it, or only the links of chosen clients.
type netFault struct {
	name string

	mu     sync.Mutex
	active map[*proxy.Link]bool
}

func newNetFault(name string) *netFault { return &netFault{name: name, active: map[*proxy.Link]bool{}} }

func (f *netFault) Name() string { return f.name }

func (f *netFault) linkFault(a *Action) proxy.Fault {
	switch f.name {
	case Partition, Isolate:
		return proxy.Fault{Mode: proxy.Partition}
	case Reject:
		return proxy.Fault{Mode: proxy.Reject}
	case Latency:
		return proxy.Fault{Mode: proxy.Latency, Latency: a.Link.Latency, Jitter: a.Link.Jitter}
	default:
		return proxy.Fault{Mode: proxy.Slow, RateKBps: a.Link.RateKBps}
	}
}

func (f *netFault) Available(env *Env, a *Action) error {
	if env.Mesh == nil {
		return fmt.Errorf("%s needs the proxied network, which this backend does not have", f.name)
	}
	if err := f.linkFault(a).Validate(); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	if len(f.links(env, a)) == 0 {
		return fmt.Errorf("%s on %v hits no link", f.name, a.Nodes)
	}
	return nil
}

// links selects the links the action hits.
func (f *netFault) links(env *Env, a *Action) []*proxy.Link {
	targets := map[string]bool{}
	for _, n := range a.Nodes {
		targets[n] = true
	}
	clients := map[string]bool{}
	for _, c := range a.Clients {
		clients[ClientLinkName(c)] = true
	}
	var out []*proxy.Link
	for _, l := range env.Mesh.Links() {
		switch {
		case f.name == Isolate || a.Internal:
			// Only the cluster's own traffic into the node: clients keep
			// their links, so the node can go on serving some of them.
			if l.From == InternalLinkFrom && targets[l.To] {
				out = append(out, l)
			}
		case len(clients) > 0:
			if clients[l.From] && targets[l.To] {
				out = append(out, l)
			}
		case targets[l.To] || targets[l.From]:
			out = append(out, l)
		}
	}
	return out
}

func (f *netFault) Start(ctx context.Context, env *Env, a *Action) error {
	lf := f.linkFault(a)
	links := f.links(env, a)
	var errs []error
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range links {
		if err := l.Apply(lf); err != nil {
			errs = append(errs, fmt.Errorf("%s %s->%s: %w", f.name, l.From, l.To, err))
			continue
		}
		f.active[l] = true
	}
	return errors.Join(errs...)
}

func (f *netFault) Stop(ctx context.Context, env *Env, a *Action) error {
	return f.heal(ctx, f.links(env, a))
}

func (f *netFault) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	var links []*proxy.Link
	for l := range f.active {
		links = append(links, l)
	}
	f.mu.Unlock()
	return f.heal(ctx, links)
}

func (f *netFault) heal(ctx context.Context, links []*proxy.Link) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, l := range links {
		if !f.active[l] {
			continue
		}
		if err := l.Heal(ctx); err != nil {
			errs = append(errs, fmt.Errorf("heal %s->%s: %w", l.From, l.To, err))
			continue
		}
		delete(f.active, l)
	}
	return errors.Join(errs...)
}

func describeNet(a *Action, lf proxy.Fault) string {
	who := "all links"
	if len(a.Clients) > 0 {
		var cs []string
		for _, c := range a.Clients {
			cs = append(cs, strconv.Itoa(c))
		}
		who = "clients " + strings.Join(cs, ",")
	}
	return fmt.Sprintf("%s: %s of %s", lf, who, strings.Join(a.Nodes, ", "))
}

// InternalLinkFrom is the source name of the cluster's internal links
// (replica→primary, sentinel→node, sentinel↔sentinel) in the mesh.
const InternalLinkFrom = "net"

// ClientLinkName is the mesh name of client worker w ("c3").
func ClientLinkName(w int) string { return "c" + strconv.Itoa(w) }
