package liblocks

import (
	"context"
	"time"

	"github.com/valkey-io/valkey-go"
	"github.com/valkey-io/valkey-go/valkeylock"
)

// Names of valkeylock (github.com/valkey-io/valkey-go/valkeylock), rueidislock's design in Valkey's Go client: its default
// KeyMajority of 2 (three keys), and KeyMajority 1 (one key).
const (
	ValkeylockName  = "valkeylock"
	Valkeylock1Name = "valkeylock-1"
)

// Valkeylock and Valkeylock1 are valkeylock's descriptors.
var (
	Valkeylock = ctxDescriptor(ValkeylockName, "the valkey-io/valkey-go valkeylock library at its defaults (rueidislock's design): 2 of 3 keys valkeylock:<i>:<name>, SET NX PXAT from the client's clock, "+
		"renewed every TTL/2 in the background; the holder's belief is a context the library cancels on a CLIENT TRACKING notification or a failed renewal",
		valkeyLibrary, 2)
	Valkeylock1 = ctxDescriptor(Valkeylock1Name, "valkeylock with KeyMajority 1: one key valkeylock:0:<name>, otherwise as valkeylock",
		valkeyLibrary, 1)
)

func valkeyLibrary(majority int32) ctxLibrary {
	return ctxLibrary{name: ValkeylockName, prefix: "valkeylock", majority: majority,
		notLocked: valkeylock.ErrNotLocked, build: buildValkeylock}
}

// buildValkeylock makes valkeylock's Locker as buildRueidislock does
// rueidislock's: the same API under other names.
func buildValkeylock(conn dialSpec, validity time.Duration, majority int32, obs *ctxObserver) (ctxLocker, error) {
	opt := valkey.ClientOption{InitAddress: conn.addrs, ForceSingleClient: conn.single(), DialCtxFn: conn.dialCtxFn(),
		Sentinel: valkey.SentinelOption{MasterSet: conn.masterSet}}
	return valkeylock.NewLocker(valkeylock.LockerOption{
		ClientOption: opt, KeyValidity: validity, KeyMajority: majority,
		ClientBuilder: func(o valkey.ClientOption) (valkey.Client, error) {
			o.OnInvalidations = observeInvalidations(obs, o.OnInvalidations)
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
	return observeDo(c.obs, cmd.Commands(), func() valkey.ValkeyResult { return c.Client.Do(ctx, cmd) }, func(err error) bool {
		_, refused := valkey.IsValkeyErr(err)
		return refused && !valkey.IsValkeyNil(err)
	})
}
