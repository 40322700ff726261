#!/usr/bin/env python3
"""Mutant minority_quorum (class: a quorum that is not a majority). quorum is
N//2 (2 of 5): two clients can each hold two of five nodes at once, with no
fault at all.

Reached by: any Redlock run with contention. Named by: minority-grant (an
overlap with no server cause until then).
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class MinorityQuorum(Reference):
    name = "mutant: minority_quorum"

    def quorum(self):
        return len(self.nodes) // 2  # the bug: not a majority


if __name__ == "__main__":
    main(MinorityQuorum)
