#!/usr/bin/env python3
"""A token lock that counts its validity from the reply instead of from
before the request, as node-redlock (#169) and pottery did: the deadline
is the time after SET returns + TTL, so the holder believes longer than
the key can live by the request's round trip. Release and extend are
otherwise correct (extend counts from its reply too).

    lockjepsen test --client 'python3 examples/review/late_stamp.py' --nemesis latency --latency 50ms
"""
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockproto  # noqa: E402

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"


class LateStampLock:
    def __init__(self, init):
        self.r = lockproto.connect(init)
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)

    def acquire(self, key, ttl_ms, started):
        token = "%s.%d" % (self.prefix, next(self.counter))
        if not self.r.set(key, token, nx=True, px=ttl_ms):
            raise lockproto.NotAcquired()
        return token, time.monotonic_ns() + ttl_ms * 1_000_000  # the bug: from the reply

    def extend(self, key, token, ttl_ms, started):
        if self.r.eval(EXTEND, 1, key, token, ttl_ms) != 1:
            raise lockproto.NotHeld()
        return time.monotonic_ns() + ttl_ms * 1_000_000

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise lockproto.NotHeld()


if __name__ == "__main__":
    lockproto.serve(LateStampLock, "review: validity from the reply")
