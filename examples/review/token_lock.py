#!/usr/bin/env python3
"""A correct token lock on one Redis, as a lockjepsen client.

Acquire: SET key token NX PX ttl; the lease is valid until the time read
before the request + TTL - drift (TTL/100 + 2 ms). Release: a Lua
compare-and-delete, ok only if it deleted. Extend: a Lua
compare-and-PEXPIRE, ok only if the token matched, valid from before the
request.

    lockjepsen test --client 'python3 examples/review/token_lock.py'
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockproto  # noqa: E402

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"


class TokenLock:
    def __init__(self, init):
        self.r = lockproto.connect(init)
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)

    def acquire(self, key, ttl_ms, started):
        token = "%s.%d" % (self.prefix, next(self.counter))
        if not self.r.set(key, token, nx=True, px=ttl_ms):
            raise lockproto.NotAcquired()
        return token, started + ttl_ms * 1_000_000 - lockproto.drift_ns(ttl_ms)

    def extend(self, key, token, ttl_ms, started):
        if self.r.eval(EXTEND, 1, key, token, ttl_ms) != 1:
            raise lockproto.NotHeld()
        return started + ttl_ms * 1_000_000 - lockproto.drift_ns(ttl_ms)

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise lockproto.NotHeld()


if __name__ == "__main__":
    lockproto.serve(TokenLock, "review: token lock (correct)")
