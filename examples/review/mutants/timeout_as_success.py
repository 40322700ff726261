#!/usr/bin/env python3
"""Mutant timeout_as_success (class: an unknown outcome taken for a grant).
lock_node counts a timeout as a yes: a request that never reached the
server grants a lease the server never stored.

Reached by: a partition between clients and server (partition). Named by:
overlap (no server cause: the server never granted it).
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class TimeoutAsSuccess(Reference):
    name = "mutant: timeout_as_success"

    def lock_node(self, r, key, token, ttl_ms):
        try:
            return bool(r.set(key, token, nx=True, px=ttl_ms))
        except lockproto.redis.RedisError:
            return True  # the bug: maybe is taken for yes


if __name__ == "__main__":
    main(TimeoutAsSuccess)
