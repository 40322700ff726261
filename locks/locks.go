// Package locks defines the Locker interface the harness drives and the Redis
// locks under test. A lock's answers are either definite (ErrNotAcquired,
// ErrNotHeld, a Redis error reply: the operation did not take effect) or
// unknown (timeouts, connection errors: it may have taken effect), and the
// harness records them differently.
package locks

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotAcquired is the definite answer that the lock is held by someone
// else and was not granted.
var ErrNotAcquired = errors.New("not acquired")

// ErrNotHeld is the definite answer that the caller no longer holds the lock
// it tried to extend or release.
var ErrNotHeld = errors.New("not held")

// Locker takes locks. Implementations must be safe for use by one client
// (goroutine) at a time; the harness gives each client its own Locker.
type Locker interface {
	// TryAcquire makes one attempt. It returns ErrNotAcquired if the lock is
	// definitely held by another, and any other error when the outcome is
	// unknown.
	TryAcquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)
}

// Lease is a granted lock.
type Lease interface {
	Token() string
	// ValidUntil is the client's own belief of when it must stop acting
	// under the lock. The zero time means no limit (a lock without TTL).
	ValidUntil() time.Time
	// Fence is a fencing token that increases with every grant, if the lock
	// has one.
	Fence() (int64, bool)
	// Extend asks for ttl more from now; ErrNotHeld if the lock was lost.
	Extend(ctx context.Context, ttl time.Duration) error
	// Release gives the lock up; ErrNotHeld if it was no longer held.
	Release(ctx context.Context) error
}

// Definite reports whether err is an answer that the operation did not take
// effect, as opposed to an unknown outcome.
func Definite(err error) bool {
	if errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrNotHeld) {
		return true
	}
	// A Redis error reply (READONLY, LOADING, a script error) means the
	// server refused the command: it did not run.
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// Started is a lease whose lock stamps when it began the grant (or the
// latest extend): the lease model counts the TTL from that stamp, as no
// server can start a key's TTL before the request that set it was sent.
// Without one it counts from the harness's invocation, which comes
// earlier, by as long as a loaded machine takes to get into the lock; an
// honest lease then looks as if it claimed more than the server keeps.
//
// A lock on the clients the harness gives it (Conn.Client) needs no stamp:
// those clients stamp the first command each operation sends. Implement
// Started when the lock sends through anything else: a Go lock that dials
// Redis itself (from Conn.Addr, or with connections of its own), or a
// client of another language, which reads its clock just before it calls
// its lock. Take the stamp with time.Now() just before the first request
// goes out, and keep the zero time until there is one; a zero stamp
// counts as none. examples/mylock is a lock that dials for itself and
// stamps.
type Started interface {
	StartedAt() time.Time
}

// ClientProcess is a lease whose client is an operating-system process of
// its own (a lock written in another language, driven over the client
// protocol). Client faults act on the whole process: a pause stops it
// (SIGSTOP), every thread included, so that a library's background
// renewal stops too; a crash kills it (SIGKILL).
type ClientProcess interface {
	StopProcess() error
	ContinueProcess() error
	KillProcess() error
}

// Background is a lease its client renews in the background (a watchdog,
// as Redisson's): client faults act on the renewer as on a process's
// threads. A pause pauses the renewals; a crash stops them.
type Background interface {
	PauseRenewal()
	ResumeRenewal()
	StopRenewal()
}

// Revocable is a lease whose lock renews it by itself and ends its
// holder's belief by itself, as rueidislock does with the context it hands
// the holder: the library cancels it when the server tells it the key
// changed (CLIENT TRACKING) or a renewal fails. The holder has no deadline
// of its own (ValidUntil is zero while the belief lasts, and the time it
// ended once it has). The harness records every Act as the process's
// background event; the last one is the revocation, unless the holder
// released first. Acts is closed once the lock is done with the lease.
type Revocable interface {
	Acts() <-chan Act
}

// Act is one of a Revocable lease's own acts: a renewal, or the
// revocation (Ended set).
type Act struct {
	// From and At are a renewal's send and completion; a revocation has
	// both at the moment the lock ended the belief.
	From, At time.Time
	// TTL is how long a renewal asked the key to live counted from its
	// completion (At): the lease model takes At + TTL as the latest the
	// key could live. A lock that sets an absolute expiry gives what
	// remains of it at At (zero or less once it has passed).
	TTL time.Duration
	// Err is a renewal's failure: nil when it succeeded; Definite tells a
	// refusal from an unknown outcome.
	Err error
	// Ended says why the lock ended the belief: history.EndedNotification,
	// EndedDeadline or EndedError; "" for a renewal.
	Ended string
}
