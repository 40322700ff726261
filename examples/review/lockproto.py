"""The lockjepsen client protocol, version 1 (docs/client-protocol.md), as
the review's five Python clients share it: one JSON request a line on
stdin, one JSON reply a line on stdout, logs on stderr.

A lock is a class built from the init message with
    acquire(key, ttl_ms, started) -> (token, valid_until_mono_ns[, granted_by])
    extend(key, token, ttl_ms, started) -> valid_until_mono_ns
    release(key, token)
where started is CLOCK_MONOTONIC read here, before the lock is called. It
raises NotAcquired or NotHeld for a definite failure; any other exception
(a timeout, a lost connection) is an unknown outcome.
"""
import json
import os
import sys
import time


class NotAcquired(Exception):
    pass


class NotHeld(Exception):
    pass


def redis_module():
    """redis-py, re-running under Debian's /usr/bin/python3 (which has
    python3-redis) when the python3 first on PATH cannot import it."""
    try:
        import redis
        return redis
    except ImportError:
        debian = "/usr/bin/python3"
        if os.path.exists(debian) and os.path.realpath(sys.executable) != os.path.realpath(debian):
            os.execv(debian, [debian] + sys.argv)
        raise


# At import, before stdin is read: a re-run must not lose the handshake.
redis = redis_module()


def connect(init):
    """A connection to the first node, with the harness's operation timeout."""
    host, port = init["nodes"][0]["addr"].rsplit(":", 1)
    t = init["op_timeout_ms"] / 1000
    return redis.Redis(host=host, port=int(port), socket_timeout=t, socket_connect_timeout=t)


def drift_ns(ttl_ms):
    """Redis's published margin, TTL/100 + 2 ms: expiry is kept in whole ms."""
    return ttl_ms * 10_000 + 2_000_000


def serve(make_lock, name):
    lock = None
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        kind = msg["type"]
        started = time.monotonic_ns()
        try:
            if kind == "init":
                lock = make_lock(msg)
                reply = {"type": "init_ok", "protocol": 1, "name": name, "capabilities": ["extend"]}
            elif kind == "acquire":
                granted = lock.acquire(msg["key"], msg["ttl_ms"], started)
                token, vu = granted[0], granted[1]
                reply = {"type": "ok", "token": token, "started_mono_ns": started, "valid_until_mono_ns": vu}
                if len(granted) > 2:  # a lock over several nodes names those that granted
                    reply["granted_by"] = granted[2]
            elif kind == "extend":
                vu = lock.extend(msg["key"], msg["token"], msg["ttl_ms"], started)
                reply = {"type": "ok", "started_mono_ns": started, "valid_until_mono_ns": vu}
            elif kind == "release":
                lock.release(msg["key"], msg["token"])
                reply = {"type": "ok"}
            else:
                reply = {"type": "fail", "error": "unsupported " + kind}
        except NotAcquired:
            reply = {"type": "fail", "error": "not-acquired"}
        except NotHeld:
            reply = {"type": "fail", "error": "not-held"}
        except Exception as e:  # may have reached the server: unknown
            if kind == "init":
                raise
            reply = {"type": "info", "error": "%s: %s" % (type(e).__name__, e)}
        reply["in_reply_to"] = msg["id"]
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
