<?php
/*
 * Symfony Lock (Debian's php-symfony-lock) as a lockjepsen client, used the
 * way Symfony's documentation shows:
 *
 *     $factory = new LockFactory(new RedisStore($redis));
 *     $lock = $factory->createLock('invoice-42', 30);
 *     if ($lock->acquire()) {
 *         ... while (!$lock->isExpired()) work; $lock->refresh() ...
 *         $lock->release();
 *     }
 *
 * On a single Redis the store gets a phpredis connection; on Sentinel and
 * Redis Cluster a Predis client (Symfony's RedisStore takes either); on
 * the Redlock system a CombinedStore of one RedisStore per node with the
 * ConsensusStrategy, Symfony's Redlock. The lock counts its own lifetime
 * (getRemainingLifetime()), which the client reports as its belief, and
 * can refresh it (extend).
 *
 * The connections are made once, for the life of the process, as a
 * long-lived worker (Messenger, a daemon) holds them. phpredis never
 * reconnects a connection it marked failed (a command while the server
 * was down), and RedisStore has no reconnect of its own: after a server
 * kill this client, like such a worker, stays without that server
 * (docs/libraries.md).
 *
 *     lockjepsen test --client 'php examples/php/symfony_lock.php'
 *     lockjepsen test --system sentinel --client 'php examples/php/symfony_lock.php'
 */

require __DIR__ . '/lockjepsen_client.php';
require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use LockJepsen\NotAcquired;
use LockJepsen\NotHeld;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\CombinedStore;
use Symfony\Component\Lock\Store\RedisStore;
use Symfony\Component\Lock\Strategy\ConsensusStrategy;

final class SymfonyLock
{
    private LockFactory $factory;
    /** @var RedisStore[] the stores of the nodes, by address (Redlock) */
    private array $stores = [];
    private string $prefix;
    private int $n = 0;
    /** @var array<string, array{0: \Symfony\Component\Lock\LockInterface, 1: Key}> token -> lock */
    private array $held = [];

    public function __construct(array $init)
    {
        $this->prefix = $init['token_prefix'];
        switch ($init['system'] ?? '') {
            case 'redlock':
                foreach ($init['nodes'] as $n) {
                    $this->stores[$n['addr']] = new RedisStore(LockJepsen\phpredis($init, $n['addr']));
                }
                $store = new CombinedStore(array_values($this->stores), new ConsensusStrategy());
                break;
            case 'sentinel':
            case 'cluster':
                $store = new RedisStore(LockJepsen\predis($init));
                break;
            default:
                $store = new RedisStore(LockJepsen\phpredis($init, $init['nodes'][0]['addr']));
        }
        $this->factory = new LockFactory($store);
    }

    public function acquire(string $key, int $ttl_ms): array
    {
        $k = new Key($key);
        $lock = $this->factory->createLockFromKey($k, $ttl_ms / 1000, false);
        if (!$lock->acquire(false)) {
            throw new NotAcquired();
        }
        $token = $this->prefix . '.' . ++$this->n;
        $this->held[$token] = [$lock, $k];
        [$until, $started] = $this->belief($lock, $ttl_ms);
        return [$token, $until, null, $this->grantedBy($k), $started];
    }

    /**
     * The lock's belief, and when its lifetime began: Symfony counts a
     * lock's lifetime from just before the request that set the key's TTL
     * (acquire() saves the key with the store's initial TTL, then
     * refreshes it to the lock's), on the wall clock (microtime).
     */
    private function belief($lock, int $ttl_ms): array
    {
        $until = LockJepsen\until_ns($lock->getRemainingLifetime());
        return [$until, $until - $ttl_ms * 1000000];
    }

    /** On Redlock, the nodes whose store holds the key, by the library's own exists(). */
    private function grantedBy(Key $k): ?array
    {
        $by = [];
        foreach ($this->stores as $addr => $store) {
            try {
                if ($store->exists($k)) {
                    $by[] = $addr;
                }
            } catch (\Throwable $e) {
            }
        }
        return $by ?: null;
    }

    public function extend(string $key, string $token, int $ttl_ms): array
    {
        [$lock] = $this->held[$token] ?? throw new NotHeld();
        try {
            $lock->refresh($ttl_ms / 1000);
        } catch (LockConflictedException $e) { // someone else's, or gone
            throw new NotHeld();
        }
        return $this->belief($lock, $ttl_ms);
    }

    public function release(string $key, string $token): void
    {
        [$lock] = $this->held[$token] ?? throw new NotHeld();
        unset($this->held[$token]);
        $lock->release(); // Symfony says nothing when the key was gone: it reports what it knows
    }
}

(new LockJepsen\Server(
    fn (array $init) => new SymfonyLock($init),
    'Symfony Lock RedisStore (CombinedStore + ConsensusStrategy on redlock)',
    ['extend'],
    ['single', 'sentinel', 'cluster', 'redlock'],
))->serve();
