#!/usr/bin/env python3
"""The mutant corpus's reference: a correct token lock on one Redis and a
correct Redlock over several, written from docs/client-protocol.md alone.

Each step is one method, so that a mutant (a file beside this one) is a
subclass that overrides exactly one of them with a real library's bug:

  new_token        a token unique per grant: <token_prefix>.<counter>
  quorum           a majority of the nodes: N//2 + 1 (1 of 1 on single)
  lock_node        SET key token NX PX ttl on one node
  validity         the time read before the first request + TTL - drift
                   (TTL/100 + 2 ms, Redis's and Redlock's margin)
  extend_validity  the same, counted from before the extend's requests
  extend_node      a Lua compare-and-PEXPIRE on one node
  unlock_node      a Lua compare-and-delete on one node
  acquire          lock on every node (in parallel); granted with a quorum
                   and a validity still ahead; otherwise, if any node said
                   yes or did not answer, a compare-and-delete on every node
  extend           extend on every node; ok with a quorum and a validity
                   still ahead
  release          unlock on every node; ok only if a quorum deleted

A definite failure is fail (not-acquired, not-held); a failure where a
node's answer was lost (a timeout) may have happened, and is answered
info.

    lockjepsen review --client '/usr/bin/python3 examples/review/mutants/reference.py'
    lockjepsen review --system redlock --client '/usr/bin/python3 examples/review/mutants/reference.py'
"""
import concurrent.futures
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lockproto  # noqa: E402

RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
EXTEND = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"


class Unknown(Exception):
    """A quorum not reached while some node's answer was lost."""


class Reference:
    name = "mutants: reference (token lock / Redlock)"

    def __init__(self, init):
        t = init["op_timeout_ms"] / 1000
        self.nodes, self.addrs = [], [n["addr"] for n in init["nodes"]]
        for n in init["nodes"]:
            host, port = n["addr"].rsplit(":", 1)
            self.nodes.append(lockproto.redis.Redis(host=host, port=int(port), socket_timeout=t, socket_connect_timeout=t))
        self.prefix = init["token_prefix"]
        self.counter = itertools.count(1)
        self.pool = concurrent.futures.ThreadPoolExecutor(len(self.nodes)) if len(self.nodes) > 1 else None

    # --- the steps a mutant may replace -------------------------------

    def new_token(self):
        return "%s.%d" % (self.prefix, next(self.counter))

    def quorum(self):
        return len(self.nodes) // 2 + 1

    def lock_node(self, r, key, token, ttl_ms):
        return bool(r.set(key, token, nx=True, px=ttl_ms))

    def validity(self, started, ttl_ms):
        return started + ttl_ms * 1_000_000 - lockproto.drift_ns(ttl_ms)

    def extend_validity(self, token, started, ttl_ms):
        return self.validity(started, ttl_ms)

    def extend_node(self, r, key, token, ttl_ms):
        return r.eval(EXTEND, 1, key, token, ttl_ms) == 1

    def unlock_node(self, r, key, token):
        return r.eval(RELEASE, 1, key, token) == 1

    # --- the protocol's operations ------------------------------------

    def each(self, fn):
        """fn on every node: (how many said yes, the errors); the
        addresses of the nodes that said yes are kept in self.said_yes."""
        if self.pool is None:
            ok = fn(self.nodes[0])
            self.said_yes = self.addrs[:1] if ok else []
            return (1 if ok else 0), []
        done = [self.pool.submit(fn, r) for r in self.nodes]
        yes, errors, self.said_yes = 0, [], []
        for addr, f in zip(self.addrs, done):
            try:
                if f.result():
                    yes += 1
                    self.said_yes.append(addr)
            except Exception as e:  # a node down or slow: it did not say yes
                errors.append(e)
        return yes, errors

    def acquire(self, key, ttl_ms, started):
        token = self.new_token()
        yes, errors = self.each(lambda r: self.lock_node(r, key, token, ttl_ms))
        valid_until = self.validity(started, ttl_ms)
        if yes >= self.quorum() and valid_until > time.monotonic_ns():
            return token, valid_until, self.said_yes  # granted_by: the nodes that granted
        if yes or errors:
            # Not granted: give back what we may hold, by the compare-and-
            # delete itself (not unlock_node, so that a release mutant
            # changes the client's releases alone).
            self.each(lambda r: r.eval(RELEASE, 1, key, token))
        if errors:
            raise Unknown("%d of %d nodes, %d errors: %r" % (yes, len(self.nodes), len(errors), errors[0]))
        raise lockproto.NotAcquired()

    def extend(self, key, token, ttl_ms, started):
        yes, errors = self.each(lambda r: self.extend_node(r, key, token, ttl_ms))
        valid_until = self.extend_validity(token, started, ttl_ms)
        if yes >= self.quorum() and valid_until > time.monotonic_ns():
            return valid_until
        if errors:
            raise Unknown("%d of %d nodes, %d errors: %r" % (yes, len(self.nodes), len(errors), errors[0]))
        raise lockproto.NotHeld()

    def release(self, key, token):
        yes, errors = self.each(lambda r: self.unlock_node(r, key, token))
        if yes >= self.quorum():
            return
        if errors:
            raise Unknown("%d of %d nodes, %d errors: %r" % (yes, len(self.nodes), len(errors), errors[0]))
        raise lockproto.NotHeld()


def main(cls):
    lockproto.serve(cls, cls.name)


if __name__ == "__main__":
    main(Reference)
