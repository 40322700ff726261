#!/usr/bin/env python3
"""Mutant getdel_release (class: release compares in the client). unlock_node
GETs the key, compares the token here, then DELs, as redis-py's Lock before
3.0 did: the key can expire and be taken by the next client between the two
round trips.

Reached by: a slow network with releases near the lease's end
(slow-network). Named by: overlap, cause foreign-release.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class GetDelRelease(Reference):
    name = "mutant: getdel_release"

    def unlock_node(self, r, key, token):
        if r.get(key) != token.encode():
            return False
        return r.delete(key) == 1  # the bug: the key may be another client's by now


if __name__ == "__main__":
    main(GetDelRelease)
