package harness

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/cluster/proxy"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/workloads"
)

// clusterReload is how often a client reloads the cluster's slots.
const clusterReload = time.Second

// serverKey is the lock under test's Descriptor.ServerKey, nil for a
// client of another process or a lock that keeps the key itself.
func (r *runner) serverKey() func(string) string {
	if d, err := locks.Lookup(r.cfg.Lock); err == nil && len(r.cfg.Client) == 0 {
		return d.ServerKey
	}
	return nil
}

// clusterLockerFactory gives each client process a go-redis cluster
// client, as applications on Redis Cluster have: it learns the slots from
// the nodes and follows MOVED and ASK redirections. Its dialer sends each
// connection through the client's own link to that node when there are
// links; the nodes announce the cluster's internal links, which a client
// does not use.
func (r *runner) clusterLockerFactory(mesh *proxy.Mesh, nodes []cluster.Node) workloads.LockerFactory {
	byAddr := addrIndex(nodes)
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.Addr)
	}
	return func(process int) (locks.Locker, io.Closer, error) {
		dial := linkDialer(mesh, byAddr, process%r.cfg.Clients, nil)
		o := r.clientOptions("", 2)
		rdb := redis.NewClusterClient(&redis.ClusterOptions{
			// A copy each: go-redis appends the nodes it learns to the
			// slice it was given, and the clients must not share one.
			Addrs: slices.Clone(seeds), Dialer: dial,
			// No second attempt of any kind: go-redis sends a command
			// that failed on the network once more to the same node
			// within its redirection budget, which would hide an
			// unknown outcome (and could apply a SET twice). A MOVED
			// reply still makes the client reload the slots, so its next
			// command goes to the new primary.
			MaxRedirects: -1, MaxRetries: o.MaxRetries,
			// A dead primary answers no MOVED: the client learns of the
			// failover from this reload (go-redis's default is 60 s).
			ClusterStateReloadInterval: clusterReload,
			DialTimeout:                o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
			ContextTimeoutEnabled: true, PoolSize: o.PoolSize, DisableIdentity: true,
		})
		l, err := r.newLockOn(locks.Conn{Name: "cluster", Client: rdb}, process)
		if err != nil {
			return nil, nil, err
		}
		var closer io.Closer = rdb
		if c, ok := l.(io.Closer); ok {
			// A lock with clients of its own (rueidislock's) closes them.
			closer = closeAll{c, rdb}
		}
		// The node that granted is the primary of the key's slot as this
		// client knew it: the witness then names two primaries when two
		// granted the same key.
		return servedBy{l, func(ctx context.Context, key string) []string {
			m, err := rdb.MasterForKey(ctx, key)
			if err != nil {
				return nil
			}
			if n, ok := byAddr[m.Options().Addr]; ok {
				return []string{n.Name}
			}
			return nil
		}, r.serverKey()}, closer, nil
	}
}
