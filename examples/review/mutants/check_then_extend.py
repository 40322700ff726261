#!/usr/bin/env python3
"""Mutant check_then_extend (class: extend compares in the client). extend_node
GETs the key, compares the token here, then PEXPIREs it: an extend sent as
the lease runs out finds its token, the key expires and the next client
takes it, and the PEXPIRE lengthens the next holder's key (the GET-then-DEL
release's race, on extend).

Reached by: renewal on a slow network, extends near the lease's end
(renew-slow). Named by: a dishonest extend across a grant.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class CheckThenExtend(Reference):
    name = "mutant: check_then_extend"

    def extend_node(self, r, key, token, ttl_ms):
        if r.get(key) != token.encode():
            return False
        return bool(r.pexpire(key, ttl_ms))  # the bug: the key may be another client's by now


if __name__ == "__main__":
    main(CheckThenExtend)
