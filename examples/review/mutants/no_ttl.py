#!/usr/bin/env python3
"""Mutant no_ttl (class: a key with no expiry). lock_node is SET NX without
PX: a holder that dies holds the lock for ever (the SETNX-only locks of
many home-grown clients; the harness's own setnx-nottl).

Reached by: a client crash (client-crash). Named by: never-frees (today the
review's cell says stuck).
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class NoTTL(Reference):
    name = "mutant: no_ttl"

    def lock_node(self, r, key, token, ttl_ms):
        return bool(r.set(key, token, nx=True))  # the bug: no PX


if __name__ == "__main__":
    main(NoTTL)
