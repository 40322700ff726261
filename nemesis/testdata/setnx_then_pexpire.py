"""A broken lock client (Laravel #31166, ShedLock #105): its acquire is
SETNX, then a separate PEXPIRE. A reply lost, or a death, between the two
leaves a key with no TTL that nobody ever gets again. Its release is a
correct compare-and-delete."""
import time
import uuid

import os
import sys

# The protocol loop the review's clients share (examples/review/lockproto.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "review"))
import lockproto  # noqa: E402
from lockproto import NotAcquired, NotHeld, connect, drift_ns, redis, serve  # noqa: E402,F401

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


class SetnxThenPexpire:
    def __init__(self, init):
        self.r = connect(init)
        self.prefix = init["token_prefix"]

    def acquire(self, key, ttl_ms, started):
        token = "%s-%s" % (self.prefix, uuid.uuid4().hex)
        if not self.r.setnx(key, token):
            raise NotAcquired()
        self.r.pexpire(key, ttl_ms)  # a second command: the bug
        return token, started + ttl_ms * 1_000_000 - drift_ns(ttl_ms)

    def extend(self, key, token, ttl_ms, started):
        raise NotHeld()

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise NotHeld()


if __name__ == "__main__":
    serve(SetnxThenPexpire, "setnx-then-pexpire")
