package liblocks

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
)

// Names of rueidislock (github.com/redis/rueidis/rueidislock): its default
// KeyMajority of 2 (three keys), and KeyMajority 1 (one key).
const (
	RueidislockName  = "rueidislock"
	Rueidislock1Name = "rueidislock-1"
)

// Rueidislock and Rueidislock1 are rueidislock's descriptors.
var (
	Rueidislock = locks.Descriptor{
		Name: RueidislockName,
		Description: "the redis/rueidis rueidislock library at its defaults: 2 of 3 keys rueidislock:<i>:<name>, SET NX PXAT from the client's clock, " +
			"renewed every TTL/2 in the background; the holder's belief is a context the library cancels on a CLIENT TRACKING notification or a failed renewal",
		Nodes: locks.SingleNode, Systems: []string{cluster.Single, cluster.RedisCluster}, BackgroundRenewal: true,
		ServerKey: func(key string) string { return "rueidislock:0:" + key },
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(newCtxLock(rueidisLibrary(2), nodes, opts.TokenPrefix))
		},
	}
	Rueidislock1 = locks.Descriptor{
		Name:        Rueidislock1Name,
		Description: "rueidislock with KeyMajority 1: one key rueidislock:0:<name>, otherwise as rueidislock",
		Nodes:       locks.SingleNode, Systems: []string{cluster.Single, cluster.RedisCluster}, BackgroundRenewal: true,
		ServerKey: func(key string) string { return "rueidislock:0:" + key },
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(newCtxLock(rueidisLibrary(1), nodes, opts.TokenPrefix))
		},
	}
)

func rueidisLibrary(majority int32) ctxLibrary {
	return ctxLibrary{name: RueidislockName, prefix: "rueidislock", majority: majority,
		notLocked: rueidislock.ErrNotLocked, build: buildRueidislock}
}

// buildRueidislock makes rueidislock's Locker at its defaults but for
// KeyValidity and KeyMajority, on a client that dials through the
// harness's links and that the adapter observes.
func buildRueidislock(conn dialSpec, validity time.Duration, majority int32, obs *ctxObserver) (ctxLocker, error) {
	opt := rueidis.ClientOption{InitAddress: conn.addrs, ForceSingleClient: !conn.cluster}
	if conn.dial != nil {
		opt.DialCtxFn = func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return conn.dial(ctx, "tcp", addr)
		}
	}
	return rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: opt, KeyValidity: validity, KeyMajority: majority,
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			if onInv := o.OnInvalidations; onInv != nil {
				o.OnInvalidations = func(ms []rueidis.RedisMessage) {
					keys := make([]string, 0, len(ms))
					for _, m := range ms {
						if k, err := m.ToString(); err == nil {
							keys = append(keys, k)
						}
					}
					obs.invalidated(keys, ms == nil)
					onInv(ms)
				}
			}
			c, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			return rueidisObserved{Client: c, obs: obs}, nil
		},
	})
}

// rueidisObserved shows the observer every command the library sends
// through Do (its scripts).
type rueidisObserved struct {
	rueidis.Client
	obs *ctxObserver
}

func (c rueidisObserved) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	answered := c.obs.sending(cmd.Commands()) // read before Do recycles cmd
	r := c.Client.Do(ctx, cmd)
	if answered != nil {
		n, err := r.AsInt64()
		_, refused := rueidis.IsRedisErr(err)
		answered(n, err, refused && !rueidis.IsRedisNil(err))
	}
	return r
}
