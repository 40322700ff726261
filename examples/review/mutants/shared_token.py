#!/usr/bin/env python3
"""Mutant shared_token (class: a token shared by every client). new_token is
one constant, as a lock whose value is a fixed string or a value the user
passes (aredis #119, redsync #168, bsm/redislock #66): the compare-and-
delete of a holder whose lease ran out matches the next holder's key.

Reached by: holds that outlast the TTL (long-holds). Named by: overlap,
cause shared-token.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class SharedToken(Reference):
    name = "mutant: shared_token"

    def new_token(self):
        return "lock"  # the bug: the same value in every client


if __name__ == "__main__":
    main(SharedToken)
