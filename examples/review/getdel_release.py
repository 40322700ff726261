#!/usr/bin/env python3
"""A token lock whose release compares in the client: GET the key, compare
the token in Python, then DEL (redis-py before 3.0, Laravel before 5.8).
Between the GET and the DEL the key can expire and pass to another client,
whose key the DEL then deletes. Acquire and extend are correct.

    lockjepsen test --client 'python3 examples/review/getdel_release.py' \\
        --nemesis latency --latency 50ms --hold 400ms..450ms ...
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockproto  # noqa: E402

EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"


class GetDelLock:
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
        # The bug: the compare and the delete are two round trips.
        if self.r.get(key) != token.encode():
            raise lockproto.NotHeld()
        self.r.delete(key)


if __name__ == "__main__":
    lockproto.serve(GetDelLock, "review: GET-then-DEL release")
