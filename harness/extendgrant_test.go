package harness_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockjepsen/lockjepsen/checker"
	"github.com/lockjepsen/lockjepsen/cluster"
	"github.com/lockjepsen/lockjepsen/harness"
	"github.com/lockjepsen/lockjepsen/locks"
	"github.com/lockjepsen/lockjepsen/review"
	"github.com/lockjepsen/lockjepsen/scenario"
	"github.com/lockjepsen/lockjepsen/testkit/harnesstest"
	"github.com/lockjepsen/lockjepsen/testkit/redistest"
)

// getPexpire is a broken lock whose Extend reads the key, compares the
// token in the client, then sets the TTL with a second command: sent as
// its lease runs out, the GET sees its own key, and the PEXPIRE, a reply's
// latency later, the next holder's. Its grant and release are correct.
const getPexpire = "test-get-pexpire"

var registerGetPexpire = sync.OnceValue(func() error {
	return locks.Register(locks.Descriptor{Name: getPexpire, Description: "a token lock whose extend is GET, then PEXPIRE (broken)",
		Nodes: locks.SingleNode, Systems: []string{cluster.Single},
		New: func(nodes []locks.Conn, opts locks.Options) (locks.Locker, error) {
			return &gpLock{rdb: nodes[0].Client, prefix: opts.TokenPrefix}, nil
		}})
})

type gpLock struct {
	rdb    redis.UniversalClient
	prefix string
	mu     sync.Mutex
	n      int
}

type gpLease struct {
	l          *gpLock
	key, token string
	mu         sync.Mutex
	validUntil time.Time
}

var compareAndDelete = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func (l *gpLock) TryAcquire(ctx context.Context, key string, ttl time.Duration) (locks.Lease, error) {
	l.mu.Lock()
	l.n++
	token := fmt.Sprintf("%s-%d", l.prefix, l.n)
	l.mu.Unlock()
	start := time.Now()
	ok, err := l.rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", locks.ErrNotAcquired, key)
	}
	return &gpLease{l: l, key: key, token: token, validUntil: start.Add(ttl)}, nil
}

func (le *gpLease) Token() string        { return le.token }
func (le *gpLease) Fence() (int64, bool) { return 0, false }

func (le *gpLease) ValidUntil() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.validUntil
}

func (le *gpLease) Extend(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	v, err := le.l.rdb.Get(ctx, le.key).Result()
	if errors.Is(err, redis.Nil) || (err == nil && v != le.token) {
		return fmt.Errorf("%w: %s", locks.ErrNotHeld, le.key)
	}
	if err != nil {
		return err
	}
	// The bug: the key may have changed hands since the GET.
	if ok, err := le.l.rdb.PExpire(ctx, le.key, ttl).Result(); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("%w: %s", locks.ErrNotHeld, le.key))
	}
	le.mu.Lock()
	le.validUntil = start.Add(ttl)
	le.mu.Unlock()
	return nil
}

func (le *gpLease) Release(ctx context.Context) error {
	n, err := compareAndDelete.Run(ctx, le.l.rdb, []string{le.key}, le.token).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", locks.ErrNotHeld, le.key)
	}
	return nil
}

// renewSlowConfig is the renew-slow threat's run of lock on one Redis.
func renewSlowConfig(t *testing.T, lock string) harness.Config {
	t.Helper()
	cfg := scenario.Base()
	cfg.System, cfg.Lock, cfg.Store, cfg.Expect = cluster.Single, lock, t.TempDir(), harness.ExpectAny
	for _, th := range review.Threats {
		if th.Name == "renew-slow" {
			th.Inject(&cfg)
			return cfg
		}
	}
	t.Fatal("no renew-slow threat")
	return cfg
}

// Under the renew-slow threat (replies late by a tenth of the TTL, extends
// sent half that before the validity ends), a lock whose extend is GET,
// then PEXPIRE extends the next holder's key and answers ok: the check
// flags an extend with another client's grant inside it, the lock's
// dishonest extend, and the run stops there (a generous limit, so that a
// loaded machine only takes longer). The token lock's compare-and-extend
// stays safe, and its extends raced the expiry.
func TestExtendOverGrantOnRealServers(t *testing.T) {
	redistest.RequireBinary(t)
	if err := registerGetPexpire(); err != nil {
		t.Fatal(err)
	}
	t.Run("get-pexpire", func(t *testing.T) {
		cfg := renewSlowConfig(t, getPexpire)
		harnesstest.UntilViolation(&cfg)
		r := harnesstest.Run(t, cfg).Results
		summary := strings.Join(r.Summary(), "\n")
		t.Log(summary)
		if r.ExtendGrants == nil || r.ExtendGrants.Count == 0 || r.Verdict != checker.VerdictUnsafe {
			t.Fatalf("no extend with a grant inside it:\n%s", summary)
		}
		found := false
		for _, m := range r.Answers.Mechanisms {
			found = found || (m.Kind == checker.MechDishonestExtend && m.Cause == checker.CauseGrantInsideExtend)
		}
		if !found || !strings.Contains(r.ExtendGrants.Examples[0].Story, "grant fell inside it") {
			t.Fatalf("mechanisms %+v:\n%s", r.Answers.Mechanisms, summary)
		}
	})
	t.Run("token", func(t *testing.T) {
		cfg := renewSlowConfig(t, locks.Token)
		cfg.TimeLimit = 4 * time.Second
		r := harnesstest.Run(t, cfg).Results
		summary := strings.Join(r.Summary(), "\n")
		t.Log(summary)
		if r.Verdict != checker.VerdictSafe || r.ExtendGrants.Count != 0 {
			t.Fatalf("the token lock was not safe:\n%s", summary)
		}
		if r.Exercised.AcrossExpiry == 0 {
			t.Fatalf("no extend raced its key's expiry:\n%s", summary)
		}
	})
}
