#!/usr/bin/env python3
"""A minimal correct token lock in Python, as a lockjepsen client.

Acquire: SET key token NX PX ttl; the lease is valid until the time taken
before the request + TTL - (TTL/100 + 2 ms). Release: a Lua
compare-and-delete. Extend: a Lua compare-and-PEXPIRE. With --fenced, the
grant and an INCR of a fencing counter run in one Lua script, and every
grant carries its fence, so that a fenced resource can refuse a stale
holder's write.

    lockjepsen test --client 'python3 examples/python/token_lock.py'
    lockjepsen test --client 'python3 examples/python/token_lock.py --fenced' --workload counter --nemesis client-pause
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lockjepsen_client as lj  # noqa: E402

lj.use_debian_python("redis")
import redis  # noqa: E402

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"
FENCED_ACQUIRE = ("if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
                  "return redis.call('INCR', KEYS[1] .. ':fence') else return false end")


class TokenLock:
    def __init__(self, init, fenced):
        host, port = init["nodes"][0]["addr"].rsplit(":", 1)
        timeout = init["op_timeout_ms"] / 1000
        self.r = redis.Redis(host=host, port=int(port), socket_timeout=timeout,
                             socket_connect_timeout=timeout, retry_on_timeout=False)
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)
        self.fenced = fenced

    def acquire(self, key, ttl_ms):
        token = "%s.%d" % (self.prefix, next(self.counter))
        start = lj.request_started_ns()
        if self.fenced:
            fence = self.r.eval(FENCED_ACQUIRE, 1, key, token, ttl_ms)
            if fence is None:
                raise lj.NotAcquired()
        else:
            fence = None
            if not self.r.set(key, token, nx=True, px=ttl_ms):
                raise lj.NotAcquired()
        return token, start + ttl_ms * 1_000_000 - lj.drift_ns(ttl_ms), fence

    def extend(self, key, token, ttl_ms):
        start = lj.request_started_ns()
        if self.r.eval(EXTEND, 1, key, token, ttl_ms) != 1:
            raise lj.NotHeld()
        return start + ttl_ms * 1_000_000 - lj.drift_ns(ttl_ms)

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise lj.NotHeld()


if __name__ == "__main__":
    fenced = "--fenced" in sys.argv[1:]
    name = "python token lock" + (" (fenced)" if fenced else "")
    caps = ["extend"] + (["fence"] if fenced else [])
    lj.serve(lambda init: TokenLock(init, fenced), name, capabilities=caps)
