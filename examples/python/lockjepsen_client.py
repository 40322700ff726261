"""The lockjepsen client protocol, version 1 (docs/client-protocol.md), for
lock clients written in Python: read one JSON request a line on stdin,
answer one JSON reply a line on stdout, log to stderr.

A lock plugs in as an object with acquire, release and (optionally)
extend; see token_lock.py and redispy_lock.py.
"""
import json
import os
import sys
import time

PROTOCOL = 1


class NotAcquired(Exception):
    """The lock is held by someone else: a definite failure."""


class NotHeld(Exception):
    """The caller no longer holds the lock: a definite failure."""


def use_debian_python(module):
    """Run under Debian's /usr/bin/python3 when the python3 first on PATH
    (a pyenv shim, a virtualenv) cannot import the library under test."""
    try:
        __import__(module)
    except ImportError:
        debian = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(debian) and os.path.exists(debian):
            os.execv(debian, [debian] + sys.argv)
        raise


def now_ns():
    """CLOCK_MONOTONIC, which the harness reads too."""
    return time.monotonic_ns()


_request_started = 0


def request_started_ns():
    """The stamp the reply reports as started_mono_ns, taken before the lock
    was called. A lock that counts its validity from it claims no more than
    the lease model allows, even when the process was paused or starved
    between the stamp and the lock's own request (a CI run under load saw
    54 ms there, and a lock counting from its own later start was flagged
    as over-claiming)."""
    return _request_started


def drift_ns(ttl_ms):
    """The margin of Redis's published lock algorithm: TTL/100 + 2 ms. Redis
    stores expiry in whole milliseconds, so a key can vanish up to a
    millisecond before start + TTL even on a healthy server."""
    return ttl_ms * 10_000 + 2_000_000


def dial(init, addr):
    """The (host, port) to dial for an address the servers reported (the
    primary the sentinels name, a node of the cluster's slots): the
    harness's link for this client when there is one (init's address_map),
    as the Go clients' dialer does."""
    addr = init.get("address_map", {}).get(addr, addr)
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def serve(make_lock, name, capabilities=(), systems=()):
    """Answer the harness until stdin closes. make_lock(init) builds the lock
    from the init message (system, nodes, sentinels, op_timeout_ms,
    token_prefix). systems: the systems the lock runs on (none: single and
    redlock)."""
    lock = None
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if msg["type"] == "init":
            lock = make_lock(msg)
            reply = {"type": "init_ok", "protocol": PROTOCOL, "name": name, "capabilities": list(capabilities)}
            if systems:
                reply["systems"] = list(systems)
        else:
            reply = answer(lock, msg)
        reply["in_reply_to"] = msg["id"]
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def answer(lock, msg):
    global _request_started
    kind = msg["type"]
    started = now_ns()  # just before the lock is called, as the harness stamps its invoke
    _request_started = started
    try:
        if kind == "acquire":
            # (token, valid_until, fence), and optionally the addresses of
            # the nodes that granted, as dialed.
            got = lock.acquire(msg["key"], msg["ttl_ms"])
            token, valid_until, fence = got[:3]
            reply = {"type": "ok", "token": token, "started_mono_ns": started}
            if len(got) > 3 and got[3]:
                reply["granted_by"] = list(got[3])
            if valid_until is not None:
                reply["valid_until_mono_ns"] = valid_until
            if fence is not None:
                reply["fence"] = fence
            return reply
        if kind == "extend":
            valid_until = lock.extend(msg["key"], msg["token"], msg["ttl_ms"])
            reply = {"type": "ok", "started_mono_ns": started}
            if valid_until is not None:
                reply["valid_until_mono_ns"] = valid_until
            return reply
        if kind == "release":
            lock.release(msg["key"], msg["token"])
            return {"type": "ok"}
        return {"type": "fail", "error": "unknown request " + kind}
    except NotAcquired:
        return {"type": "fail", "error": "not-acquired"}
    except NotHeld:
        return {"type": "fail", "error": "not-held"}
    except Exception as e:  # a timeout or a lost connection: it may have happened
        return {"type": "info", "error": "%s: %s" % (type(e).__name__, e)}
