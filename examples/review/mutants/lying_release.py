#!/usr/bin/env python3
"""Mutant lying_release (class: release reports ok whatever it found). release
runs the correct compare-and-delete but answers ok even when it deleted
nothing, as redsync v4.0.3 did (fixed in v4.0.4, PR #61).

Reached by: holds that outlast the TTL (long-holds). Named by:
dishonest-release.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class LyingRelease(Reference):
    name = "mutant: lying_release"

    def release(self, key, token):
        self.each(lambda r: self.unlock_node(r, key, token))  # the bug: the count is ignored


if __name__ == "__main__":
    main(LyingRelease)
