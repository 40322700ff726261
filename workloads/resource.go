package workloads

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrStaleFence is the resource's definite refusal of an operation whose
// fencing token is lower than one it has already seen.
var ErrStaleFence = errors.New("stale fencing token")

// Resource is the protected resource of the counter workload: a counter per
// lock key in a redis-server that no fault touches. With a fence, reads and
// writes are checked against the highest fence seen, as a fencing-aware
// store would do: the read counts too, or a stale holder's write could land
// between a newer holder's read and write, losing an update even with
// fencing.
type Resource struct {
	Client *redis.Client
}

var (
	// KEYS: value, max fence. ARGV: fence. Returns the value or -1 (stale).
	fencedRead = redis.NewScript(`
local max = tonumber(redis.call('GET', KEYS[2]) or '-1')
local f = tonumber(ARGV[1])
if f < max then return -1 end
redis.call('SET', KEYS[2], f)
return tonumber(redis.call('GET', KEYS[1]) or '0')`)
	// KEYS: value, max fence. ARGV: fence, value. Returns 1 or 0 (stale).
	fencedWrite = redis.NewScript(`
local max = tonumber(redis.call('GET', KEYS[2]) or '-1')
local f = tonumber(ARGV[1])
if f < max then return 0 end
redis.call('SET', KEYS[2], f)
redis.call('SET', KEYS[1], ARGV[2])
return 1`)
)

func valueKey(key string) string { return "resource:" + key }
func fenceKey(key string) string { return "resource:" + key + ":fence" }

// Read returns the counter of key; with a fence, ErrStaleFence if a newer
// fence has been seen.
func (r *Resource) Read(ctx context.Context, key string, fence *int64) (int64, error) {
	if fence == nil {
		n, err := r.Client.Get(ctx, valueKey(key)).Int64()
		if err == redis.Nil {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read resource %s: %w", key, err)
		}
		return n, nil
	}
	n, err := fencedRead.Run(ctx, r.Client, []string{valueKey(key), fenceKey(key)}, *fence).Int64()
	if err != nil {
		return 0, fmt.Errorf("read resource %s: %w", key, err)
	}
	if n < 0 {
		return 0, ErrStaleFence
	}
	return n, nil
}

// Write sets the counter of key to n; with a fence, ErrStaleFence if a
// newer fence has been seen.
func (r *Resource) Write(ctx context.Context, key string, n int64, fence *int64) error {
	if fence == nil {
		if err := r.Client.Set(ctx, valueKey(key), n, 0).Err(); err != nil {
			return fmt.Errorf("write resource %s: %w", key, err)
		}
		return nil
	}
	ok, err := fencedWrite.Run(ctx, r.Client, []string{valueKey(key), fenceKey(key)}, *fence, n).Int64()
	if err != nil {
		return fmt.Errorf("write resource %s: %w", key, err)
	}
	if ok == 0 {
		return ErrStaleFence
	}
	return nil
}
