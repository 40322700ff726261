#!/usr/bin/env python3
"""Mutant release_swallows_error (class: an unknown release reported as a
definite failure). unlock_node turns a timeout into no, so a release whose
DEL reached the server but whose reply was lost answers not-held, as
libraries that log and drop the error do. No fault makes this unsafe: the
holder's belief ends when it sends the release, whatever the answer, and
a key it failed to delete expires with its TTL; the cost is a history that
says fail for what may have happened. Listed, not expected to be killed.
"""
import os
import sys
import time  # noqa: F401

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import Reference, lockproto, main  # noqa: E402,F401


class ReleaseSwallowsError(Reference):
    name = "mutant: release_swallows_error"

    def unlock_node(self, r, key, token):
        try:
            return super().unlock_node(r, key, token)
        except lockproto.redis.RedisError:
            return False  # the bug: maybe is reported as no


if __name__ == "__main__":
    main(ReleaseSwallowsError)
