<?php
/*
 * Laravel's cache lock (Debian's php-illuminate-cache and
 * php-illuminate-redis) as a lockjepsen client, used the way Laravel's
 * documentation shows:
 *
 *     $lock = Cache::lock('invoice-42', 10);
 *     if ($lock->get()) {
 *         ... work ...
 *         $lock->release();
 *     }
 *
 * outside the framework: the Cache facade's store is Illuminate's
 * RedisStore on a RedisManager configured as config/database.php would
 * configure it: phpredis on a single Redis; Predis with replication
 * 'sentinel' on Sentinel; Predis 'clusters' on Redis Cluster.
 *
 * The lock is SET NX EX in whole seconds (RedisLock, PhpRedisLock), so a
 * TTL under a second is rounded up to one (0 would mean no expiry at
 * all). Laravel gives its user no validity and no way to refresh: the
 * client reports no deadline (the holder believes until it releases) and
 * no extend.
 *
 *     lockjepsen test --client 'php examples/php/laravel_lock.php'
 *     lockjepsen test --system sentinel --client 'php examples/php/laravel_lock.php'
 */

require __DIR__ . '/lockjepsen_client.php';
require_once '/usr/share/php/Illuminate/Cache/autoload.php';
require_once '/usr/share/php/Illuminate/Redis/autoload.php';

use Illuminate\Cache\RedisStore;
use Illuminate\Cache\Repository;
use Illuminate\Redis\RedisManager;
use LockJepsen\NotAcquired;
use LockJepsen\NotHeld;

final class LaravelLock
{
    private Repository $cache;
    private string $prefix;
    private int $n = 0;
    /** @var array<string, \Illuminate\Contracts\Cache\Lock> token -> lock */
    private array $held = [];

    public function __construct(array $init)
    {
        $this->prefix = $init['token_prefix'];
        $timeout = $init['op_timeout_ms'] / 1000;
        $linked = ['connections' => new LockJepsen\LinkedFactory($init)];
        switch ($init['system'] ?? '') {
            case 'sentinel':
                $config = ['default' => array_merge(LockJepsen\uris($init['sentinels']), [
                    'options' => $linked + ['replication' => 'sentinel', 'service' => $init['master_name']],
                ])];
                $driver = 'predis';
                break;
            case 'cluster':
                $config = ['clusters' => ['default' => LockJepsen\uris($init['nodes']),
                    'options' => $linked + ['cluster' => 'redis']]];
                $driver = 'predis';
                break;
            default:
                [$host, $port] = LockJepsen\dial($init, $init['nodes'][0]['addr']);
                $config = ['default' => ['host' => $host, 'port' => $port, 'timeout' => $timeout, 'read_timeout' => $timeout]];
                $driver = 'phpredis';
        }
        $this->cache = new Repository(new RedisStore(new RedisManager(null, $driver, $config)));
        if ($driver === 'predis' && ($init['system'] ?? '') === 'sentinel') {
            LockJepsen\sentinel_attempts($this->cache->getStore()->connection()->client()->getConnection(), $init);
        }
    }

    public function acquire(string $key, int $ttl_ms): array
    {
        $lock = $this->cache->lock($key, max(1, (int) ceil($ttl_ms / 1000)));
        if (!$lock->get()) {
            throw new NotAcquired();
        }
        $token = $this->prefix . '.' . ++$this->n;
        $this->held[$token] = $lock;
        return [$token, null, null]; // no deadline: Laravel gives none
    }

    public function release(string $key, string $token): void
    {
        $lock = $this->held[$token] ?? throw new NotHeld();
        unset($this->held[$token]);
        if (!$lock->release()) { // the owner's compare-and-delete found another owner, or nothing
            throw new NotHeld();
        }
    }
}

(new LockJepsen\Server(
    fn (array $init) => new LaravelLock($init),
    'Laravel Cache::lock() (Illuminate RedisLock)',
    [],
    ['single', 'sentinel', 'cluster'],
))->serve();
