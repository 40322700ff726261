<?php
/*
 * malkusch/lock (Debian's php-malkusch-lock) as a lockjepsen client, used
 * the way its documentation shows:
 *
 *     $mutex = new OneAttemptMutex([$redis1, $redis2, $redis3], 'invoice-42', 10);
 *     $mutex->synchronized(function () {
 *         ... work ...
 *     });
 *
 * over the one node of a single Redis, or every node of the Redlock system
 * (a quorum: malkusch's RedisMutex is its Redlock). synchronized() keeps
 * the lock on the call stack for as long as the callback runs, so the
 * client answers the acquire from inside the callback and serves the
 * harness's requests there until the release of that lock arrives; the
 * callback then returns and the library unlocks.
 *
 * The protocol asks for one attempt per acquire (the harness retries and
 * records each), and synchronized() spins until timeout: OneAttemptMutex
 * lets the library make its attempt (its own Redlock acquire, which
 * releases a minority it got) and ends the spin when it fails. Nothing
 * else of the library is changed.
 *
 * The timeout is whole seconds (a TTL under a second is rounded up to
 * one): the key expires after timeout + 1 s, acquisition spins for up to
 * timeout, and unlock() throws ExecutionOutsideLockException when the
 * code ran longer than timeout. The code inside synchronized() is never
 * told its time is up, so its belief has no deadline; and the library
 * cannot refresh a lock (no extend).
 *
 *     lockjepsen test --client 'php examples/php/malkusch_lock.php'
 *     lockjepsen test --system redlock --client 'php examples/php/malkusch_lock.php'
 */

require __DIR__ . '/lockjepsen_client.php';
require_once '/usr/share/php/Malkusch/Lock/autoload.php';

use malkusch\lock\exception\ExecutionOutsideLockException;
use malkusch\lock\mutex\PHPRedisMutex;
use malkusch\lock\mutex\RedisMutex;
use LockJepsen\NotHeld;

/** PHPRedisMutex that gives up after its first attempt (see above). */
final class OneAttemptMutex extends PHPRedisMutex
{
    protected function acquire(string $key, int $expire): bool
    {
        if (parent::acquire($key, $expire)) {
            return true;
        }
        throw new LockJepsen\NotAcquired();
    }
}

final class MalkuschLock
{
    private LockJepsen\Server $server;
    /** @var \Redis[] by address */
    private array $redis = [];
    private string $prefix;
    private int $n = 0;

    public function __construct(array $init, LockJepsen\Server $server)
    {
        $this->server = $server;
        $this->prefix = $init['token_prefix'];
        foreach ($init['nodes'] as $n) {
            $this->redis[$n['addr']] = LockJepsen\phpredis($init, $n['addr']);
        }
    }

    /** Answers the acquire itself, and the requests its hold lasts. */
    public function acquire(string $key, int $ttl_ms, array $req): ?array
    {
        $mutex = new OneAttemptMutex(array_values($this->redis), $key, max(1, (int) ceil($ttl_ms / 1000)));
        $token = $this->prefix . '.' . ++$this->n;
        $release = null;
        $answered = false;
        try {
            $mutex->synchronized(function () use ($mutex, $key, $token, $req, &$release, &$answered) {
                $this->server->answer($req, $this->server->ok($token, null, $this->grantedBy($mutex, $key)));
                $answered = true;
                $release = $this->server->serve(fn ($r) => $r['type'] === 'release' && $r['token'] === $token);
            });
        } catch (\Throwable $e) {
            if (!$answered) {
                // NotAcquired: no quorum; LockAcquireException: too many
                // servers failed (unknown).
                throw $e;
            }
            if ($release !== null) {
                $this->server->answer($release, $this->releaseError($e));
            }
            return null;
        }
        if ($release !== null) {
            $this->server->answer($release, ['type' => 'ok']);
        }
        return null; // answered; or stdin closed while it held the lock
    }

    /** What a failed unlock tells the releaser. */
    private function releaseError(\Throwable $e): array
    {
        if ($e instanceof ExecutionOutsideLockException) {
            // The code ran past timeout: malkusch does not release then.
            return ['type' => 'fail', 'error' => 'not-held'];
        }
        // LockReleaseException: no quorum of deletes, from errors or from
        // keys already gone, which the library does not tell apart.
        return ['type' => 'info', 'error' => get_class($e) . ': ' . $e->getMessage()];
    }

    /**
     * The nodes that hold the mutex's token, for the holder-aimed faults:
     * malkusch keeps its token private, so the harness cannot read it from
     * the keys; this reads it (instrumentation, not the library's API).
     */
    private function grantedBy(RedisMutex $mutex, string $key): ?array
    {
        if (count($this->redis) < 2) {
            return null;
        }
        $token = (new \ReflectionProperty(RedisMutex::class, 'token'))->getValue($mutex);
        $by = [];
        foreach ($this->redis as $addr => $r) {
            try {
                if ($r->get('lock_' . $key) === $token) {
                    $by[] = $addr;
                }
            } catch (\Throwable $e) {
            }
        }
        return $by ?: null;
    }

    public function release(string $key, string $token): void
    {
        throw new NotHeld(); // a release of a lock this client does not hold
    }
}

(new LockJepsen\Server(
    fn (array $init, LockJepsen\Server $server) => new MalkuschLock($init, $server),
    'malkusch/lock PHPRedisMutex',
    [],
    ['single', 'redlock'],
))->serve();
