package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
)

// InternalNet cuts and heals the cluster's own traffic into one node
// (replica→primary, sentinel→node, sentinel↔sentinel, raft) on backends
// whose internal links are not in the harness's mesh: the container
// backends, whose processes talk through a toxiproxy server on their
// private network. A cut node still serves the clients, whose links are
// in the mesh.
type InternalNet interface {
	// CutInternal applies f to every internal link into node, replacing
	// whatever fault the link had.
	CutInternal(ctx context.Context, node string, f proxy.Fault) error
	// HealInternal removes every fault from the internal links into node;
	// healing a healthy node is no error.
	HealInternal(ctx context.Context, node string) error
}

// InternalNodes is optionally implemented by an InternalNet to say which
// processes have internal links it can cut (none on systems without
// internal traffic), so that a fault on another node is refused before the
// run rather than failing during it.
type InternalNodes interface {
	InternalNodes() []string
}

var netDescriptors = []Descriptor{
	{Name: Partition, Description: "the target nodes' links are black holes: requests get no answer and time out",
		Kind: KindLink, Links: true, Exercises: serverMoments, Draw: Draw{Class: classNet, Label: "cut off"}, new: buildNet(Partition)},
	{Name: Reject, Description: "connections to the target nodes are reset at once",
		Kind: KindLink, Links: true, Exercises: serverMoments, Draw: Draw{Class: classNet, Label: "rejecting"}, new: buildNet(Reject)},
	{Name: Latency, Description: "replies from the target nodes are delayed (--latency, --jitter)",
		Kind: KindLink, Links: true, RepliesOnly: true, Exercises: []string{momentSlowReplies, momentNodeFaults}, Draw: Draw{Class: classNet, Label: "slow replies"}, new: buildNet(Latency)},
	{Name: ReplyLoss, Description: "the target nodes' replies are lost while their requests still reach them and are applied; the window outlasts the op timeout, and the heal closes the connections",
		Kind: KindLink, Links: true, RepliesOnly: true, LosesReplies: true, OutlastsOps: true,
		Exercises: []string{momentRepliesLost}, Draw: Draw{Class: classNet, Label: "replies lost"}, new: buildNet(ReplyLoss)},
	{Name: Slow, Description: "links to the target nodes are throttled (--bandwidth)",
		Kind: KindLink, Links: true, Exercises: serverMoments, Draw: Draw{Class: classNet, Label: "throttled"}, new: buildNet(Slow)},
	// Isolate needs no client links: it cuts only the cluster's own links
	// into a node, and clients must still reach it.
	{Name: Isolate, Description: "the target nodes are cut off from the rest of their cluster (replicas, sentinels) while clients still reach them",
		Kind:       KindLink,
		CutsOff:    true,
		Systems:    systemsWhere(func(d cluster.System) bool { return d.Peers != "" }),
		SystemsWhy: "cuts a node off from the rest of its cluster (single and redlock nodes do not talk to each other)",
		Exercises:  serverMoments,
		Draw:       Draw{Class: classOther}, new: buildNet(Isolate)},
}

// netFault cuts or degrades the proxied links of the target nodes: every
// link into a target node (from clients and from other nodes) and every
// link out of it, or only the links of chosen clients. Isolate and actions
// marked Internal hit only the cluster's own links into the targets: the
// mesh's "net" links where it has them, else through Env.Internal.
type netFault struct {
	name string

	mu     sync.Mutex
	active map[*proxy.Link]bool
	// cut are the nodes whose internal links this fault cut through
	// Env.Internal.
	cut map[string]bool
}

func buildNet(name string) func(*ClientFaults) (Fault, error) {
	return func(*ClientFaults) (Fault, error) { return newNetFault(name), nil }
}

func newNetFault(name string) *netFault {
	return &netFault{name: name, active: map[*proxy.Link]bool{}, cut: map[string]bool{}}
}

func (f *netFault) Name() string { return f.name }

// Describe says what the action does to the links.
func (f *netFault) Describe(a *Action) string {
	switch f.name {
	case ReplyLoss:
		return describeNet(a, f.linkFault(a)) + fmt.Sprintf(" for %s: requests are applied, their replies lost", a.For.Round(time.Millisecond))
	case Isolate:
		return fmt.Sprintf("cut off from the rest of the cluster for %s; clients still reach it", a.For.Round(time.Millisecond))
	}
	return describeNet(a, f.linkFault(a))
}

func (f *netFault) linkFault(a *Action) proxy.Fault {
	switch f.name {
	case Partition, Isolate:
		return proxy.Fault{Mode: proxy.Partition}
	case Reject:
		return proxy.Fault{Mode: proxy.Reject}
	case ReplyLoss:
		return proxy.Fault{Mode: proxy.ReplyLoss}
	case Latency:
		return proxy.Fault{Mode: proxy.Latency, Latency: a.Link.Latency, Jitter: a.Link.Jitter}
	default:
		return proxy.Fault{Mode: proxy.Slow, RateKBps: a.Link.RateKBps}
	}
}

// internal reports whether the action hits only the cluster's own links.
func (f *netFault) internal(a *Action) bool { return f.name == Isolate || a.Internal }

func (f *netFault) Available(env *Env, a *Action) error {
	if err := f.linkFault(a).Validate(); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	if f.internal(a) {
		return f.internalAvailable(env, a)
	}
	if env.Mesh == nil {
		return fmt.Errorf("%s needs the proxied network, which this backend does not have", f.name)
	}
	if len(f.links(env, a)) == 0 {
		return fmt.Errorf("%s on %v hits no link", f.name, a.Nodes)
	}
	return nil
}

// internalAvailable checks that every target node's internal links can be
// cut: through the mesh's "net" link into it, or through Env.Internal.
func (f *netFault) internalAvailable(env *Env, a *Action) error {
	if len(a.Nodes) == 0 {
		return fmt.Errorf("%s has no target node", f.name)
	}
	var known []string
	lister, canList := env.Internal.(InternalNodes)
	if canList {
		known = lister.InternalNodes()
	}
	for _, n := range f.viaInternal(env, a) {
		switch {
		case env.Internal == nil:
			return fmt.Errorf("%s on %s: the cluster's internal traffic into %s cannot be cut: the proxied network has no %q link into it and the backend has no internal network to fault (isolate and internal faults are for the sentinel system)",
				f.name, n, n, InternalLinkFrom)
		case canList && !slices.Contains(known, n):
			return fmt.Errorf("%s on %s: the backend has no internal link into %s (it has: %v; isolate and internal faults are for the sentinel system)",
				f.name, n, n, known)
		}
	}
	return nil
}

// viaInternal are the target nodes of an internal action that have no
// "net" link in the mesh: their internal links are cut through
// Env.Internal.
func (f *netFault) viaInternal(env *Env, a *Action) []string {
	inMesh := map[string]bool{}
	for _, l := range f.links(env, a) {
		inMesh[l.To] = true
	}
	var out []string
	for _, n := range a.Nodes {
		if !inMesh[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
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
	if env.Mesh == nil {
		return nil
	}
	isNode := map[string]bool{}
	for _, n := range env.Nodes {
		isNode[n] = true
	}
	for _, l := range env.Mesh.Links() {
		switch {
		case f.internal(a):
			// Only the cluster's own traffic into the node: clients keep
			// their links, so the node can go on serving some of them.
			// Isolate also cuts the links between it and other nodes
			// both ways (Redis Cluster's bus, one link per pair).
			between := f.name == Isolate && isNode[l.From] && isNode[l.To] && (targets[l.From] || targets[l.To])
			if (l.From == InternalLinkFrom && targets[l.To]) || between {
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
	if f.internal(a) {
		for _, n := range f.viaInternal(env, a) {
			if env.Internal == nil {
				errs = append(errs, fmt.Errorf("%s %s: no internal network to cut", f.name, n))
				continue
			}
			// Marked before the call: a cut that failed half-way (one
			// toxic of two) must still be healed.
			f.cut[n] = true
			if err := env.Internal.CutInternal(ctx, n, lf); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: internal links: %w", f.name, n, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (f *netFault) Stop(ctx context.Context, env *Env, a *Action) error {
	var nodes []string
	if f.internal(a) {
		nodes = a.Nodes
	}
	return f.heal(ctx, env, f.links(env, a), nodes)
}

func (f *netFault) Heal(ctx context.Context, env *Env) error {
	f.mu.Lock()
	var links []*proxy.Link
	for l := range f.active {
		links = append(links, l)
	}
	var nodes []string
	for n := range f.cut {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	return f.heal(ctx, env, links, nodes)
}

// heal restores the given links and the internal links of the given nodes,
// of those this fault has in effect.
func (f *netFault) heal(ctx context.Context, env *Env, links []*proxy.Link, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := undoEach(f.active, links, func(l *proxy.Link) error {
		if err := l.Heal(ctx); err != nil {
			return fmt.Errorf("heal %s->%s: %w", l.From, l.To, err)
		}
		return nil
	})
	errs = append(errs, undoEach(f.cut, nodes, func(n string) error {
		return nodeErr("heal the internal links of", n, env.Internal.HealInternal(ctx, n))
	})...)
	return errors.Join(errs...)
}

func describeNet(a *Action, lf proxy.Fault) string {
	who := "all links"
	if a.Internal {
		who = "the cluster's own links"
	}
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
