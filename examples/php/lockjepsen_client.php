<?php
/*
 * The lockjepsen client protocol, version 1 (docs/client-protocol.md), for
 * lock clients written in PHP: one JSON request a line on stdin, one JSON
 * reply a line on stdout, logs on stderr. Debian's php-cli with its
 * packaged libraries (scripts/deps installs them).
 *
 * A lock plugs in as an object with acquire, release and (optionally)
 * extend; see symfony_lock.php, laravel_lock.php and malkusch_lock.php.
 * The lock is built at the first request, not at the handshake: the
 * harness probes a client's handshake with no server to dial, and
 * phpredis connects as soon as it is asked to.
 */

namespace LockJepsen;

require_once 'Predis/autoload.php';

const PROTOCOL = 1;

/** The lock is someone else's: a definite failure. */
class NotAcquired extends \Exception {}

/** The caller no longer holds the lock: a definite failure. */
class NotHeld extends \Exception {}

/** CLOCK_MONOTONIC in ns, which the harness reads too. */
function now_ns(): int
{
    return hrtime(true);
}

/**
 * The belief of a library that counts its lock's lifetime in seconds
 * remaining, as CLOCK_MONOTONIC in ns.
 */
function until_ns(float $remaining_seconds): int
{
    return now_ns() + (int) floor($remaining_seconds * 1e9);
}

/**
 * [host, port] to dial for an address the servers reported (the primary
 * the sentinels name, a node of the cluster's slots): the harness's link
 * for this client when there is one (init's address_map), as the Go
 * clients' dialer does.
 */
function dial(array $init, string $addr): array
{
    $addr = $init['address_map'][$addr] ?? $addr;
    $i = strrpos($addr, ':');
    return [substr($addr, 0, $i), (int) substr($addr, $i + 1)];
}

/** A phpredis connection to one address, with the run's timeouts. */
function phpredis(array $init, string $addr): \Redis
{
    [$host, $port] = dial($init, $addr);
    $timeout = $init['op_timeout_ms'] / 1000;
    $r = new \Redis();
    $r->connect($host, $port, $timeout, null, 0, $timeout);
    return $r;
}

/**
 * Predis's connection factory, dialing every address through the
 * harness's links for this client (init's address_map); everything else
 * is Predis's own.
 */
class LinkedFactory extends \Predis\Connection\Factory
{
    private array $init;

    public function __construct(array $init)
    {
        $this->init = $init;
        $timeout = $init['op_timeout_ms'] / 1000;
        $this->setDefaultParameters(['timeout' => $timeout, 'read_write_timeout' => $timeout]);
    }

    public function create($parameters)
    {
        if ($parameters instanceof \Predis\Connection\ParametersInterface) {
            $parameters = $parameters->toArray();
        } elseif (is_string($parameters)) {
            $parameters = \Predis\Connection\Parameters::parse($parameters);
        }
        if (isset($parameters['host'], $parameters['port'])) {
            [$parameters['host'], $parameters['port']] = dial($this->init, $parameters['host'] . ':' . $parameters['port']);
        }
        return parent::create($parameters);
    }
}

/** "tcp://host:port" for each node's address. */
function uris(array $nodes): array
{
    return array_map(fn ($n) => 'tcp://' . $n['addr'], $nodes);
}

/**
 * One attempt per request on Sentinel, within the run's op timeout. Predis
 * asks a sentinel with a 100 ms timeout by default, and retries a command
 * that failed on the primary 20 times, 1 s apart
 * (Predis/Connection/Aggregate/SentinelReplication.php, $retryLimit and
 * $retryWait): a lock call made during a failover blocks for up to 20 s,
 * past the protocol's reply timeout, where the harness takes the client
 * for hung. Without the retries a failed command still forgets the
 * primary it had, and the next one asks the sentinels again; the harness
 * makes the next attempt.
 */
function sentinel_attempts(\Predis\Connection\Aggregate\SentinelReplication $sentinel, array $init): void
{
    $sentinel->setSentinelTimeout($init['op_timeout_ms'] / 1000);
    $sentinel->setRetryLimit(0);
}

/**
 * A Predis client of the system, made as Predis's documentation shows:
 * the sentinels and the service on Sentinel, the seed nodes on Redis
 * Cluster, one node otherwise.
 */
function predis(array $init): \Predis\Client
{
    $options = ['connections' => new LinkedFactory($init)];
    switch ($init['system'] ?? '') {
        case 'sentinel':
            $options += ['replication' => 'sentinel', 'service' => $init['master_name']];
            $client = new \Predis\Client(uris($init['sentinels']), $options);
            sentinel_attempts($client->getConnection(), $init);
            return $client;
        case 'cluster':
            return new \Predis\Client(uris($init['nodes']), $options + ['cluster' => 'redis']);
    }
    return new \Predis\Client(uris($init['nodes'])[0], $options);
}

class Server
{
    private $make;
    private string $name;
    private array $capabilities;
    private array $systems;
    private ?array $init = null;
    private $lock = null;
    private int $started = 0;

    /**
     * $make(array $init) builds the lock from the init message (system,
     * nodes, sentinels, op_timeout_ms, token_prefix); $systems are the
     * systems it runs on.
     */
    public function __construct(callable $make, string $name, array $capabilities, array $systems)
    {
        $this->make = $make;
        $this->name = $name;
        $this->capabilities = $capabilities;
        $this->systems = $systems;
    }

    /** The init message. */
    public function init(): array
    {
        return $this->init;
    }

    /** The stamp the reply reports as started_mono_ns. */
    public function started(): int
    {
        return $this->started;
    }

    /**
     * Answers requests until stdin closes, or until $until($request) is
     * true: that request is returned unanswered (a lock that holds its
     * library's lock on the call stack, as malkusch/lock's synchronized()
     * does, serves the requests of its critical section this way).
     */
    public function serve(?callable $until = null): ?array
    {
        while (($line = fgets(STDIN)) !== false) {
            if (trim($line) === '') {
                continue;
            }
            $req = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
            if ($until !== null && $until($req)) {
                return $req;
            }
            $reply = $this->handle($req);
            if ($reply !== null) {
                $this->answer($req, $reply);
            }
        }
        return null;
    }

    public function answer(array $req, array $reply): void
    {
        $reply['in_reply_to'] = $req['id'];
        fwrite(STDOUT, json_encode($reply, JSON_UNESCAPED_SLASHES) . "\n");
        fflush(STDOUT);
    }

    /** The reply to a request; null when the lock answered it itself. */
    private function handle(array $req): ?array
    {
        if ($req['type'] === 'init') {
            $this->init = $req;
            return ['type' => 'init_ok', 'protocol' => PROTOCOL, 'name' => $this->name,
                'capabilities' => $this->capabilities, 'systems' => $this->systems];
        }
        try {
            $this->lock ??= ($this->make)($this->init, $this);
            $this->started = now_ns(); // before the lock is called, as the harness stamps its invoke
            return $this->dispatch($req);
        } catch (NotAcquired $e) {
            return ['type' => 'fail', 'error' => 'not-acquired'];
        } catch (NotHeld $e) {
            return ['type' => 'fail', 'error' => 'not-held'];
        } catch (\Throwable $e) { // a timeout or a lost connection: it may have happened
            return ['type' => 'info', 'error' => get_class($e) . ': ' . $e->getMessage()];
        }
    }

    private function dispatch(array $req): ?array
    {
        switch ($req['type']) {
            case 'acquire':
                // [token, valid_until_ns|null, fence|null, granted_by|null], or
                // null when the lock answered itself.
                $got = $this->lock->acquire($req['key'], $req['ttl_ms'], $req);
                return $got === null ? null : $this->ok($got[0], $got[1] ?? null, $got[3] ?? null, $got[4] ?? null);
            case 'extend':
                // valid_until_ns|null, or [valid_until_ns, started_ns]
                $got = $this->lock->extend($req['key'], $req['token'], $req['ttl_ms']);
                return is_array($got) ? $this->ok(null, $got[0], null, $got[1]) : $this->ok(null, $got, null);
            case 'release':
                $this->lock->release($req['key'], $req['token']);
                return ['type' => 'ok'];
        }
        return ['type' => 'fail', 'error' => 'unknown request ' . $req['type']];
    }

    /**
     * An ok to an acquire (with its token) or an extend. $started, when
     * given, is a later start the library counts its lifetime from (the
     * start of the request that set the key's TTL), never before the
     * protocol's own stamp.
     */
    public function ok(?string $token, ?int $valid_until, ?array $granted_by, ?int $started = null): array
    {
        $reply = ['type' => 'ok', 'started_mono_ns' => max($started ?? 0, $this->started)];
        if ($token !== null) {
            $reply['token'] = $token;
        }
        if ($valid_until !== null) {
            $reply['valid_until_mono_ns'] = $valid_until;
        }
        if ($granted_by) {
            $reply['granted_by'] = $granted_by;
        }
        return $reply;
    }
}
