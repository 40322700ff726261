package liblocks

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
)

// How the context locks' clients (rueidis, valkey-go: one API under two
// import paths) reach the system and show the adapter what they do; each
// library's file keeps only what names its own types.

// ctxSystems are the systems the context locks run on: each of their
// clients speaks to one node, to Redis Cluster, and to Sentinel.
var ctxSystems = []string{cluster.Single, cluster.Sentinel, cluster.RedisCluster}

// ctxDescriptor is the descriptor of lib's lock with KeyMajority majority.
func ctxDescriptor(name, description string, lib func(majority int32) ctxLibrary, majority int32) locks.Descriptor {
	prefix := lib(majority).prefix
	return locks.Descriptor{
		Name: name, Description: description,
		Nodes: locks.SingleNode, Systems: ctxSystems, BackgroundRenewal: true,
		ServerKey: func(key string) string { return prefix + ":0:" + key },
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(newCtxLock(lib(majority), nodes, opts.TokenPrefix))
		},
	}
}

// dialSpec is how the library's client reaches the system: the address of
// the node, a cluster's seeds, or the sentinels with the master set they
// name the primary of; and the harness's dialer (through the client's
// links) when there is one.
type dialSpec struct {
	addrs     []string
	cluster   bool
	masterSet string // Sentinel: addrs are the sentinels'
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
}

// single: the client speaks to the one node of addrs.
func (s dialSpec) single() bool { return !s.cluster && s.masterSet == "" }

// dialCtxFn is the clients' DialCtxFn that dials through the harness's
// dialer, or nil (the client's own) without one.
func (s dialSpec) dialCtxFn() func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	if s.dial == nil {
		return nil
	}
	return func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
		return s.dial(ctx, "tcp", addr)
	}
}

// dialSpecOf reads where the lock's client must go from the connection the
// harness gave the lock: the sentinels (Conn.Sentinel), a Redis Cluster
// client's seeds, one node's client, or an address.
func dialSpecOf(c locks.Conn) (dialSpec, error) {
	if s := c.Sentinel; s != nil {
		if s.MasterName == "" || len(s.Addrs) == 0 {
			return dialSpec{}, fmt.Errorf("node %q: Sentinel needs a master name and the sentinels' addresses, got %q and %v", c.Name, s.MasterName, s.Addrs)
		}
		return dialSpec{addrs: append([]string(nil), s.Addrs...), masterSet: s.MasterName, dial: s.Dial}, nil
	}
	switch rdb := c.Client.(type) {
	case *redis.ClusterClient:
		o := rdb.Options()
		return dialSpec{addrs: append([]string(nil), o.Addrs...), cluster: true, dial: o.Dialer}, nil
	case *redis.Client:
		o := rdb.Options()
		if o.Addr == "FailoverClient" {
			// go-redis's failover client dials whatever primary it
			// found, whatever the address: the library must find it.
			return dialSpec{}, fmt.Errorf("node %q: a go-redis failover client without the sentinels (locks.Conn.Sentinel)", c.Name)
		}
		return dialSpec{addrs: []string{o.Addr}, dial: o.Dialer}, nil
	}
	if c.Addr != "" {
		return dialSpec{addrs: []string{c.Addr}}, nil
	}
	return dialSpec{}, fmt.Errorf("node %q: want the sentinels, a go-redis client or an address, got %T", c.Name, c.Client)
}

// observeInvalidations wraps the library's invalidation callback so that
// obs sees each one first: the keys named, or every key (a nil message:
// the connection closed). Nil stays nil (the library tracks nothing).
func observeInvalidations[M any, PM interface {
	*M
	ToString() (string, error)
}](obs *ctxObserver, onInv func([]M)) func([]M) {
	if onInv == nil {
		return nil
	}
	return func(ms []M) {
		keys := make([]string, 0, len(ms))
		for i := range ms {
			if k, err := PM(&ms[i]).ToString(); err == nil {
				keys = append(keys, k)
			}
		}
		obs.invalidated(keys, ms == nil)
		onInv(ms)
	}
}

// observeDo runs one command of the library (do) and shows obs the answer
// to a renewal among them: args are read before do, which recycles the
// command; refused tells the server's error reply from a failed call.
func observeDo[R interface{ AsInt64() (int64, error) }](obs *ctxObserver, args []string, do func() R, refused func(error) bool) R {
	answered := obs.sending(args)
	r := do()
	if answered != nil {
		n, err := r.AsInt64()
		answered(n, err, refused(err))
	}
	return r
}
