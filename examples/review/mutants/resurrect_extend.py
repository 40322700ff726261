#!/usr/bin/env python3
"""Mutant resurrect_extend (class: an extend that resurrects an expired key).
extend_node falls back to SET NX PX when the compare-and-PEXPIRE finds no
key of ours, as redsync's WithSetNXOnExtend (PR #149) and RedLock.net's
Extend.lua do: a holder paused past its lease, after another client held
and released the key, is told its lease went on without a break.

Reached by: renewal under client pauses (renew-pause). Named by: a
dishonest extend across a grant.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import EXTEND, Reference, lockproto, main  # noqa: E402,F401


class ResurrectExtend(Reference):
    name = "mutant: resurrect_extend"

    def extend_node(self, r, key, token, ttl_ms):
        if r.eval(EXTEND, 1, key, token, ttl_ms) == 1:
            return True
        return bool(r.set(key, token, nx=True, px=ttl_ms))  # the bug: resurrects an expired lease


if __name__ == "__main__":
    main(ResurrectExtend)
