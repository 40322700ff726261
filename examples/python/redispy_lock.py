#!/usr/bin/env python3
"""redis-py's own Lock (Debian's python3-redis) as a lockjepsen client.

Used the way redis-py's documentation shows:

    lock = r.lock("name", timeout=ttl)
    if lock.acquire(blocking=False):
        try:
            ...work...
        finally:
            lock.release()

redis-py's Lock has no notion of validity: an application that uses it as
documented believes it holds the lock until it releases it, so the client
reports no deadline. It has no fencing token either.

On Sentinel it finds the primary as redis-py's documentation shows:

    sentinel = Sentinel([("s1", 26379), ...], socket_timeout=0.25)
    r = sentinel.master_for("mymaster", socket_timeout=0.25)

    lockjepsen test --client 'python3 examples/python/redispy_lock.py'
    lockjepsen test --system sentinel --client 'python3 examples/python/redispy_lock.py'
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockjepsen_client as lj  # noqa: E402

lj.use_debian_python("redis")
import redis  # noqa: E402
import redis.sentinel  # noqa: E402
from redis.exceptions import LockError  # noqa: E402


class LinkedSentinel(redis.sentinel.Sentinel):
    """redis-py's Sentinel, dialing the primary it is told of through the
    harness's link for this client (the Go clients' dialer does the same);
    everything else is redis-py's own."""

    def __init__(self, init, *args, **kwargs):
        self.init = init
        super().__init__(*args, **kwargs)

    def discover_master(self, service_name):
        host, port = super().discover_master(service_name)
        return lj.dial(self.init, "%s:%s" % (host, port))


def connect(init):
    """The Redis client of the system, made the way redis-py's users make it."""
    timeout = init["op_timeout_ms"] / 1000
    opts = dict(socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False)
    if init.get("system") == "sentinel":
        sentinels = [lj.dial(init, s["addr"]) for s in init["sentinels"]]
        sentinel = LinkedSentinel(init, sentinels, sentinel_kwargs=dict(opts), **opts)
        return sentinel.master_for(init["master_name"], **opts)
    host, port = lj.dial(init, init["nodes"][0]["addr"])
    return redis.Redis(host=host, port=port, **opts)


class RedisPyLock:
    def __init__(self, init):
        self.r = connect(init)
        self.held = {}  # token -> Lock

    def acquire(self, key, ttl_ms):
        lock = self.r.lock(key, timeout=ttl_ms / 1000)
        if not lock.acquire(blocking=False):
            raise lj.NotAcquired()
        token = lock.local.token.decode()
        self.held[token] = lock
        return token, None, None, self.served_by()  # no deadline, no fence

    def served_by(self):
        """The node the lock's connection went to: on Sentinel the primary
        redis-py last discovered (as dialed), else the one node."""
        pool = self.r.connection_pool
        addr = getattr(pool, "master_address", None) or (pool.connection_kwargs["host"], pool.connection_kwargs["port"])
        return ["%s:%s" % addr]

    def extend(self, key, token, ttl_ms):
        try:
            self.held[token].extend(ttl_ms / 1000, replace_ttl=True)
        except LockError:
            raise lj.NotHeld()
        return None

    def release(self, key, token):
        lock = self.held.pop(token, None)
        if lock is None:
            raise lj.NotHeld()
        try:
            lock.release()
        except LockError:  # LockNotOwnedError: the key was gone or someone else's
            raise lj.NotHeld()


if __name__ == "__main__":
    lj.serve(RedisPyLock, "redis-py %s redis.lock.Lock" % redis.__version__, capabilities=["extend"],
             systems=["single", "sentinel"])
