#!/usr/bin/env python3
"""A broken lock for the client clock tests: the old pattern of Redis's
SETNX page, which keeps the lock's expiry in the value, read from the
client's own wall clock (time.time()).

Acquire: SETNX key "<expiry ms>:<token>"; when the key is there and its
expiry has passed by this client's clock, GETSET a new value and take the
lock if the old one had expired too. Release: GET, and DEL if the token is
ours and this client's clock says the expiry has not passed.

A client whose wall clock runs ahead of the others' (client-clock-offset,
client-clock-jump by 1.5 TTL) takes every key another client holds: the
holder's expiry has passed by its clock. Its belief is counted on
CLOCK_MONOTONIC, which libfaketime leaves alone, so the holders believe
honestly and the overlap is the lock's.

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


def now_ms():
    return int(time.time() * 1000)


def expiry_of(value):
    if value is None:
        return None
    return int(value.split(b":", 1)[0])


class ClockInValueLock:
    def __init__(self, init):
        self.r = connect(init)
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)

    def acquire(self, key, ttl_ms, started):
        token = "%s.%d" % (self.prefix, next(self.counter))
        value = "%d:%s" % (now_ms() + ttl_ms + 1, token)
        valid_until = started + ttl_ms * 1_000_000 - drift_ns(ttl_ms)
        if self.r.setnx(key, value):
            return token, valid_until
        current = expiry_of(self.r.get(key))
        if current is None or current > now_ms():
            raise NotAcquired()
        old = expiry_of(self.r.getset(key, value))
        if old is not None and old > now_ms():
            raise NotAcquired()  # another client took it first
        return token, valid_until

    def release(self, key, token):
        value = self.r.get(key)
        if value is None or value.split(b":", 1)[1].decode() != token or expiry_of(value) <= now_ms():
            raise NotHeld()
        self.r.delete(key)


if __name__ == "__main__":
    serve(ClockInValueLock, "clock-in-value GETSET lock (broken)")
