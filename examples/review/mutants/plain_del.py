#!/usr/bin/env python3
"""Mutant plain_del (class: release without a token check). unlock_node is a
plain DEL, as Laravel before 5.8 (#20709, PR #26645) and redis-py's early
locks did: a holder whose lease ran out deletes the next holder's key, and
reports ok.

Reached by: holds that outlast the TTL (long-holds), client pauses. Named
by: overlap, cause foreign-release; dishonest-release.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class PlainDel(Reference):
    name = "mutant: plain_del"

    def unlock_node(self, r, key, token):
        return r.delete(key) == 1  # the bug: whoever's key it is


if __name__ == "__main__":
    main(PlainDel)
