#!/usr/bin/env python3
"""A token lock whose extend PEXPIREs the key without checking the token
and reports ok if the key exists, as ShedLock did before #2584: a holder
that was paused past its lease lengthens the next holder's key and is told
it still holds the lock. Acquire and release are correct.

    lockjepsen test --client 'python3 examples/review/blind_extend.py' \\
        --workload renew --renew-for 3..5 --nemesis client-pause --clients 3
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockproto  # noqa: E402

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"


class BlindExtendLock:
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
        if not self.r.pexpire(key, ttl_ms):  # the bug: whose key is it?
            raise lockproto.NotHeld()
        return started + ttl_ms * 1_000_000 - lockproto.drift_ns(ttl_ms)

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise lockproto.NotHeld()


if __name__ == "__main__":
    lockproto.serve(BlindExtendLock, "review: extend without a token check")
