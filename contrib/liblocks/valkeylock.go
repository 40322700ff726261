package liblocks

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/valkey-io/valkey-go"
	"github.com/valkey-io/valkey-go/valkeylock"

	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/locks"
)

// Names of valkeylock (github.com/valkey-io/valkey-go/valkeylock), rueidislock's design in Valkey's Go client: its default
// KeyMajority of 2 (three keys), and KeyMajority 1 (one key).
const (
	ValkeylockName  = "valkeylock"
	Valkeylock1Name = "valkeylock-1"
)

// Valkeylock and Valkeylock1 are valkeylock's descriptors.
var (
	Valkeylock = locks.Descriptor{
		Name: ValkeylockName,
		Description: "the valkey-io/valkey-go valkeylock library at its defaults (rueidislock's design): 2 of 3 keys valkeylock:<i>:<name>, SET NX PXAT from the client's clock, " +
			"renewed every TTL/2 in the background; the holder's belief is a context the library cancels on a CLIENT TRACKING notification or a failed renewal",
		Nodes: locks.SingleNode, Systems: []string{cluster.Single, cluster.RedisCluster}, BackgroundRenewal: true,
		ServerKey: func(key string) string { return "valkeylock:0:" + key },
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(newCtxLock(valkeyLibrary(2), nodes, opts.TokenPrefix))
		},
	}
	Valkeylock1 = locks.Descriptor{
		Name:        Valkeylock1Name,
		Description: "valkeylock with KeyMajority 1: one key valkeylock:0:<name>, otherwise as valkeylock",
		Nodes:       locks.SingleNode, Systems: []string{cluster.Single, cluster.RedisCluster}, BackgroundRenewal: true,
		ServerKey: func(key string) string { return "valkeylock:0:" + key },
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return locks.NilOnErr(newCtxLock(valkeyLibrary(1), nodes, opts.TokenPrefix))
		},
	}
)

func valkeyLibrary(majority int32) ctxLibrary {
	return ctxLibrary{name: ValkeylockName, prefix: "valkeylock", majority: majority,
		notLocked: valkeylock.ErrNotLocked, build: buildValkeylock}
}

// buildValkeylock makes valkeylock's Locker at its defaults but for
// KeyValidity and KeyMajority, on a client that dials through the
// harness's links and that the adapter observes.
func buildValkeylock(conn dialSpec, validity time.Duration, majority int32, obs *ctxObserver) (ctxLocker, error) {
	opt := valkey.ClientOption{InitAddress: conn.addrs, ForceSingleClient: !conn.cluster}
	if conn.dial != nil {
		opt.DialCtxFn = func(ctx context.Context, addr string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return conn.dial(ctx, "tcp", addr)
		}
	}
	return valkeylock.NewLocker(valkeylock.LockerOption{
		ClientOption: opt, KeyValidity: validity, KeyMajority: majority,
		ClientBuilder: func(o valkey.ClientOption) (valkey.Client, error) {
			if onInv := o.OnInvalidations; onInv != nil {
				o.OnInvalidations = func(ms []valkey.ValkeyMessage) {
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
			c, err := valkey.NewClient(o)
			if err != nil {
				return nil, err
			}
			return valkeyObserved{Client: c, obs: obs}, nil
		},
	})
}

// valkeyObserved shows the observer every command the library sends
// through Do (its scripts).
type valkeyObserved struct {
	valkey.Client
	obs *ctxObserver
}

func (c valkeyObserved) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	answered := c.obs.sending(cmd.Commands()) // read before Do recycles cmd
	r := c.Client.Do(ctx, cmd)
	if answered != nil {
		n, err := r.AsInt64()
		_, refused := valkey.IsValkeyErr(err)
		answered(n, err, refused && !valkey.IsValkeyNil(err))
	}
	return r
}
