#!/usr/bin/env python3
"""A token lock whose release runs the correct Lua compare-and-delete but
answers ok whatever it found, as redsync v4.0.3 did: a holder whose lease
expired is told its release succeeded. Acquire and extend are correct.

    lockjepsen test --client 'python3 examples/review/lying_release.py' --long-hold-rate 0.3
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockproto  # noqa: E402

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"


class LyingReleaseLock:
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
        self.r.eval(RELEASE, 1, key, token)  # the bug: 0 (not ours) is ignored


if __name__ == "__main__":
    lockproto.serve(LyingReleaseLock, "review: release that always says ok")
