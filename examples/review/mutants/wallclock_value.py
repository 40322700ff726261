#!/usr/bin/env python3
"""Mutant wallclock_value (class: the lease kept by the client's wall clock).
acquire is the pattern the SETNX page of the Redis docs once taught: the
value is the time the lock expires by the client's wall clock, no TTL on
the key; a client that finds the key GETs it and, if that time has passed
by its own clock, steals it with GETSET. A client whose clock runs ahead
steals a live lock. (The pattern's release, a DEL if the client's own
clock says it still holds, is the reference's compare-and-delete here: the
value is the token, so the mutant differs in acquire alone.)

Reached by: a client's clock jumping forward (the client-clock faults).
Named by: overlap, no server cause.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class WallclockValue(Reference):
    name = "mutant: wallclock_value"

    def acquire(self, key, ttl_ms, started):
        r = self.nodes[0]
        token = "%d:%s" % (time.time_ns() // 1_000_000 + ttl_ms, self.new_token())
        if not r.setnx(key, token):
            old = r.get(key)
            if old is None or int(old.split(b":")[0]) > time.time_ns() // 1_000_000:
                raise lockproto.NotAcquired()
            if r.getset(key, token) != old:  # another client stole it first
                raise lockproto.NotAcquired()
        return token, self.validity(started, ttl_ms)


if __name__ == "__main__":
    main(WallclockValue)
