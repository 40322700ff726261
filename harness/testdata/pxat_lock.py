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
import json
import sys
import time

import redis  # Debian's python3-redis: run under /usr/bin/python3

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"


class NotAcquired(Exception):
    pass


class NotHeld(Exception):
    pass


class PxatLock:
    def __init__(self, init):
        host, port = init["nodes"][0]["addr"].rsplit(":", 1)
        t = init["op_timeout_ms"] / 1000
        self.r = redis.Redis(host=host, port=int(port), socket_timeout=t, socket_connect_timeout=t)
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)

    def acquire(self, key, ttl_ms, started):
        token = "%s.%d" % (self.prefix, next(self.counter))
        if not self.r.set(key, token, nx=True, pxat=int(time.time() * 1000) + ttl_ms):
            raise NotAcquired()
        return token, started + ttl_ms * 1_000_000 - (ttl_ms * 10_000 + 2_000_000)

    def release(self, key, token):
        if self.r.eval(RELEASE, 1, key, token) != 1:
            raise NotHeld()


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
                lock = PxatLock(msg)
                reply = {"type": "init_ok", "protocol": 1, "name": "SET NX PXAT lock (client's clock)", "capabilities": []}
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
