#!/usr/bin/env python3
"""A lock client written from docs/client-protocol.md alone, with a
deliberately broken lock: the release reads the key (GET), compares the
token in the client, then deletes it (DEL), as redis-py did before 3.0.
Between the GET and the DEL the key can expire and pass to another client,
whose key the DEL then deletes."""
import json
import sys
import time

try:
    import redis
except ImportError:  # Debian's python3-redis, under Debian's python3
    import os
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

r = None
prefix = ""
n = 0
for line in sys.stdin:
    msg = json.loads(line)
    reply = {"in_reply_to": msg["id"]}
    try:
        if msg["type"] == "init":
            host, port = msg["nodes"][0]["addr"].rsplit(":", 1)
            t = msg["op_timeout_ms"] / 1000
            r = redis.Redis(host=host, port=int(port), socket_timeout=t, socket_connect_timeout=t)
            prefix = msg["token_prefix"]
            reply.update(type="init_ok", protocol=1, name="GET-then-DEL lock", capabilities=[])
        elif msg["type"] == "acquire":
            n += 1
            token = "%s.%d" % (prefix, n)
            start = time.monotonic_ns()
            if r.set(msg["key"], token, nx=True, px=msg["ttl_ms"]):
                ttl_ns = msg["ttl_ms"] * 1_000_000
                reply.update(type="ok", token=token, started_mono_ns=start,
                             valid_until_mono_ns=start + ttl_ns - ttl_ns // 100 - 2_000_000)
            else:
                reply.update(type="fail", error="not-acquired")
        elif msg["type"] == "release":
            if r.get(msg["key"]) == msg["token"].encode():  # the bug: not atomic
                r.delete(msg["key"])
                reply.update(type="ok")
            else:
                reply.update(type="fail", error="not-held")
        else:
            reply.update(type="fail", error="unsupported")
    except redis.exceptions.RedisError as e:
        reply.update(type="info", error=str(e))
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
