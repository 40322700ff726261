#!/usr/bin/env python3
"""A lock for the clock-offset tests that sets an absolute expiry from the
client's wall clock, as rueidislock does: SET key token NX PXAT
(time.time() + TTL). Release: a Lua compare-and-delete.

Correct while the server's clock agrees with the clients'. With the
server's clock 1.5 TTL ahead (clock-offset), every expiry it is given has
already passed: the key is gone at once, and the next client is granted
it while the holder still believes. A relative PX would not notice.

Speaks the lockjepsen client protocol (docs/client-protocol.md).
"""
import itertools
import time

import os
import sys

# The protocol loop the review's clients share (examples/review/lockproto.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "review"))
import lockproto  # noqa: E402
from lockproto import NotAcquired, NotHeld, connect, drift_ns, redis, serve  # noqa: E402,F401

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"


class PxatLock:
    def __init__(self, init):
        self.r = connect(init)
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)

    def acquire(self, key, ttl_ms, started):
        token = "%s.%d" % (self.prefix, next(self.counter))
        if not self.r.set(key, token, nx=True, pxat=int(time.time() * 1000) + ttl_ms):
            raise NotAcquired()
        return token, started + ttl_ms * 1_000_000 - drift_ns(ttl_ms)

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise NotHeld()


if __name__ == "__main__":
    serve(PxatLock, "SET NX PXAT lock (client's clock)")
