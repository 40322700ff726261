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
import json
import sys
import time

import redis  # Debian's python3-redis: run under /usr/bin/python3


class NotAcquired(Exception):
    pass


class NotHeld(Exception):
    pass


def drift_ns(ttl_ms):
    return ttl_ms * 10_000 + 2_000_000


def now_ms():
    return int(time.time() * 1000)


def expiry_of(value):
    if value is None:
        return None
    return int(value.split(b":", 1)[0])


class ClockInValueLock:
    def __init__(self, init):
        host, port = init["nodes"][0]["addr"].rsplit(":", 1)
        t = init["op_timeout_ms"] / 1000
        self.r = redis.Redis(host=host, port=int(port), socket_timeout=t, socket_connect_timeout=t)
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


def serve():
    lock = None
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        kind = msg["type"]
        started = time.monotonic_ns()
        try:
            if kind == "init":
                lock = ClockInValueLock(msg)
                reply = {"type": "init_ok", "protocol": 1, "name": "clock-in-value GETSET lock (broken)", "capabilities": []}
            elif kind == "acquire":
                token, vu = lock.acquire(msg["key"], msg["ttl_ms"], started)
                reply = {"type": "ok", "token": token, "started_mono_ns": started, "valid_until_mono_ns": vu}
            elif kind == "release":
                lock.release(msg["key"], msg["token"])
                reply = {"type": "ok"}
            else:
                reply = {"type": "fail", "error": "unsupported " + kind}
        except NotAcquired:
            reply = {"type": "fail", "error": "not-acquired"}
        except NotHeld:
            reply = {"type": "fail", "error": "not-held"}
        except Exception as e:  # a timeout, a lost connection: unknown
            reply = {"type": "info", "error": "%s: %s" % (type(e).__name__, e)}
        reply["in_reply_to"] = msg["id"]
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
