#!/usr/bin/env python3
"""Mutant validity_from_reply (class: validity counted from the reply).
validity is the time after the reply + TTL, as node-redlock (#169) and
pottery (before 2e0f01e) counted it: the holder believes longer than the
key can live by the request's round trip.

Reached by: a slow network (slow-network). Named by: over-claimed-validity.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class ValidityFromReply(Reference):
    name = "mutant: validity_from_reply"

    def validity(self, started, ttl_ms):
        return time.monotonic_ns() + ttl_ms * 1_000_000  # the bug: from now, not from before the request


if __name__ == "__main__":
    main(ValidityFromReply)
