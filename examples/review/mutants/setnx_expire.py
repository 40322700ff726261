#!/usr/bin/env python3
"""Mutant setnx_expire (class: acquire in two commands). lock_node is SETNX,
then a separate PEXPIRE, as Laravel's cache lock before #31166 and ShedLock
before #105 did: a death or a lost reply between the two leaves a key with
no TTL, which no client can ever free.

Reached by: a kill or a lost reply between the two commands (the
reply-loss / kill-mid-op faults). Named by: never-frees.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class SetnxExpire(Reference):
    name = "mutant: setnx_expire"

    def lock_node(self, r, key, token, ttl_ms):
        if not r.setnx(key, token):
            return False
        r.pexpire(key, ttl_ms)  # the bug: a second round trip
        return True


if __name__ == "__main__":
    main(SetnxExpire)
