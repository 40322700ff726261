#!/usr/bin/env python3
"""Mutant extend_from_deadline (class: an extend's validity counted from the
old deadline). extend_validity is the previous deadline + TTL, as redsync
v4.3.0's Extend returned its validity without counting the time spent
(fixed in v4.4.0): each extend claims the time up to it again.

Reached by: renewal (renew-slow, renew-pause). Named by:
over-claimed-validity.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class ExtendFromDeadline(Reference):
    name = "mutant: extend_from_deadline"

    deadlines = {}

    def extend_validity(self, token, started, ttl_ms):
        # the bug: from the token's last deadline (the first extend's
        # start, for the first), not from before this extend
        last = self.deadlines.get(token, started)
        self.deadlines[token] = last + ttl_ms * 1_000_000
        return self.deadlines[token]


if __name__ == "__main__":
    main(ExtendFromDeadline)
