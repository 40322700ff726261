#!/usr/bin/env python3
"""Lock clients that misbehave, one way each (argv[1]), for the tests of
the harness's handling of bad clients, and one that behaves (noop: it
answers every acquire not-acquired without any Redis, to measure the
protocol alone). Written from docs/client-protocol.md."""
import json
import sys
import time

mode = sys.argv[1]
if mode == "no-start":
    sys.stderr.write("ImportError: No module named 'frobnicate'\n")
    sys.exit(1)
if mode in ("helper", "double-fork"):
    # A helper that outlives the client's answers and holds its stdout and
    # stderr: a child, or a grandchild that left the client's session.
    import os
    import subprocess
    if mode == "helper":
        child = subprocess.Popen(["sleep", "300"])
    else:
        child = subprocess.Popen(["setsid", "sleep", "300"])
    sys.stderr.write("helper pid %d\n" % child.pid)
    sys.stderr.flush()
if mode == "slow-start":
    time.sleep(float(sys.argv[2]))  # an interpreter that is slow to load


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


acquires = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "init":
        caps = ["fence"] if mode == "no-fence" else []
        send({"type": "init_ok", "in_reply_to": msg["id"], "protocol": 99 if mode == "bad-version" else 1, "capabilities": caps})
        continue
    acquires += 1
    sys.stderr.write("request %d: %s\n" % (acquires, msg["type"]))
    sys.stderr.flush()
    if mode == "garbage":
        print("connected to redis at", msg.get("key"))  # a log line on stdout
        sys.stdout.flush()
    elif mode == "wrong-id":
        send({"type": "fail", "in_reply_to": msg["id"] + 1000, "error": "not-acquired"})
    elif mode == "negative-validity":
        send({"type": "ok", "in_reply_to": msg["id"], "token": "p3.1", "valid_until_mono_ns": -5})
    elif mode == "no-token":
        send({"type": "ok", "in_reply_to": msg["id"], "valid_until_mono_ns": 5})
    elif mode == "no-fence":
        send({"type": "ok", "in_reply_to": msg["id"], "token": "p3.1"})
    elif mode == "string-id":
        send({"type": "ok", "in_reply_to": str(msg["id"]), "token": "p3.1"})
    elif mode == "hang":
        time.sleep(3600)
    elif mode == "exit" and acquires == 3:
        sys.stderr.write("boom: the client crashed\n")
        sys.exit(3)
    else:
        send({"type": "fail", "in_reply_to": msg["id"], "error": "not-acquired"})
