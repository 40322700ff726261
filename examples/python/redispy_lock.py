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

    lockjepsen test --client 'python3 examples/python/redispy_lock.py'
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockjepsen_client as lj  # noqa: E402

lj.use_debian_python("redis")
import redis  # noqa: E402
from redis.exceptions import LockError  # noqa: E402


class RedisPyLock:
    def __init__(self, init):
        host, port = init["nodes"][0]["addr"].rsplit(":", 1)
        timeout = init["op_timeout_ms"] / 1000
        self.r = redis.Redis(host=host, port=int(port), socket_timeout=timeout,
                             socket_connect_timeout=timeout, retry_on_timeout=False)
        self.held = {}  # token -> Lock

    def acquire(self, key, ttl_ms):
        lock = self.r.lock(key, timeout=ttl_ms / 1000)
        if not lock.acquire(blocking=False):
            raise lj.NotAcquired()
        token = lock.local.token.decode()
        self.held[token] = lock
        return token, None, None  # no deadline, no fence

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
    lj.serve(RedisPyLock, "redis-py %s redis.lock.Lock" % redis.__version__, capabilities=["extend"])
