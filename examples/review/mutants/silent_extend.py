#!/usr/bin/env python3
"""Mutant silent_extend (class: a renewal that reports ok without renewing).
extend_node says yes without sending anything: a watchdog that has
stopped renewing while its holder still believes, as Redisson's after a
failed renewal (#775, #3636).

Reached by: any renewal (renew-slow, renew-pause). Named by: a dishonest
extend, or the overlap that follows when the next client takes the key
(measured: both, docs/track-record.md).
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class SilentExtend(Reference):
    name = "mutant: silent_extend"

    def extend_node(self, r, key, token, ttl_ms):
        return True  # the bug: nothing was sent


if __name__ == "__main__":
    main(SilentExtend)
