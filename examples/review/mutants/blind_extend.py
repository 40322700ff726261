#!/usr/bin/env python3
"""Mutant blind_extend (class: extend without a token check). extend_node
PEXPIREs the key whoever holds it, ok if it exists, as ShedLock did before
#2584 / PR #2584: a holder paused past its lease lengthens the next
holder's key and is told it still holds.

Reached by: renewal under client pauses (renew-pause). Named by:
dishonest-extend (overlap cause foreign-extend).
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class BlindExtend(Reference):
    name = "mutant: blind_extend"

    def extend_node(self, r, key, token, ttl_ms):
        return r.pexpire(key, ttl_ms) == 1  # the bug: no token check


if __name__ == "__main__":
    main(BlindExtend)
