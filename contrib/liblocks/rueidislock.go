package liblocks

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// Names of rueidislock (github.com/redis/rueidis/rueidislock): its default
// KeyMajority of 2 (three keys), and KeyMajority 1 (one key).
const (
	RueidislockName  = "rueidislock"
	Rueidislock1Name = "rueidislock-1"
)

// Rueidislock and Rueidislock1 are rueidislock's descriptors.
var (
	Rueidislock = ctxDescriptor(RueidislockName, "the redis/rueidis rueidislock library at its defaults: 2 of 3 keys rueidislock:<i>:<name>, SET NX PXAT from the client's clock, "+
		"renewed every TTL/2 in the background; the holder's belief is a context the library cancels on a CLIENT TRACKING notification or a failed renewal",
		rueidisLibrary, 2)
	Rueidislock1 = ctxDescriptor(Rueidislock1Name, "rueidislock with KeyMajority 1: one key rueidislock:0:<name>, otherwise as rueidislock",
		rueidisLibrary, 1)
)

func rueidisLibrary(majority int32) ctxLibrary {
	return ctxLibrary{name: RueidislockName, prefix: "rueidislock", majority: majority,
		notLocked: rueidislock.ErrNotLocked, build: buildRueidislock}
}

// buildRueidislock makes rueidislock's Locker at its defaults but for
// KeyValidity and KeyMajority, on a client that dials through the
// harness's links (to a node, a cluster's seeds, or Sentinel's master
// set) and that the adapter observes.
func buildRueidislock(conn dialSpec, validity time.Duration, majority int32, obs *ctxObserver) (ctxLocker, error) {
	opt := rueidis.ClientOption{InitAddress: conn.addrs, ForceSingleClient: conn.single(), DialCtxFn: conn.dialCtxFn(),
		Sentinel: rueidis.SentinelOption{MasterSet: conn.masterSet}}
	return rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: opt, KeyValidity: validity, KeyMajority: majority,
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			o.OnInvalidations = observeInvalidations(obs, o.OnInvalidations)
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
	return observeDo(c.obs, cmd.Commands(), func() rueidis.RedisResult { return c.Client.Do(ctx, cmd) }, func(err error) bool {
		_, refused := rueidis.IsRedisErr(err)
		return refused && !rueidis.IsRedisNil(err)
	})
}
