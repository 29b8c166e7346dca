"""Queue position -> DHT key (SPEC §4, paper Lemma 4).

Theory of operation: position ``p`` of queue ``q`` maps to the point ``k(q, p) = h'(q, p)``
on the cycle, and the node ``pred(k(q, p))`` stores the entry.  Every named queue has its
own positions, so the name is part of the key (issue 12).  ``h'`` is a public
pseudorandom hash, so every process computes the same key without asking anyone, and
consecutive positions scatter over the cycle, which spreads the entries evenly over the
nodes (fairness, Corollary 19).

Keys live in the same space as node labels: integers in ``[0, 2**64)``, exact on every
host.  ``h'`` is mmh3 with a seed of its own: with the label hash's seed, a key and a
label could coincide for reasons other than chance.
"""

from __future__ import annotations

import mmh3

KEY_SEED = 0x5EED
"""mmh3 seed of the position hash; the label hash uses 0."""

POSITION_MAX = (1 << 63) - 1
"""Positions are encoded as 8-byte signed little-endian integers."""


QUEUE_NAME_BYTES_MAX = 1024
"""A longer name is a caller's bug (the core allows 128 characters)."""


_PREFIXES: dict[str, bytes] = {}
_PREFIXES_MAX = 4096  # names remembered (a cluster has at most 10,000; the rest are made)


def _prefix(queue: str) -> bytes:
    prefix = _PREFIXES.get(queue)
    if prefix is None:
        name = queue.encode()
        if len(name) > QUEUE_NAME_BYTES_MAX:
            raise ValueError(f"queue name of {len(name)} bytes")
        prefix = len(name).to_bytes(2, "little") + name  # length first: no two names collide
        if len(_PREFIXES) < _PREFIXES_MAX:
            _PREFIXES[queue] = prefix
    return prefix


def position_key(queue: str, position: int) -> int:
    """The key of ``queue``'s position ``position``: a label in ``[0, 2**64)``.

    Positions start at 1 (SPEC §6); anything else is a bug of the caller, so it fails loudly.
    """
    if not 1 <= position <= POSITION_MAX:
        raise ValueError(f"position {position} is not in [1, 2**63)")
    data = _prefix(queue) + position.to_bytes(8, "little", signed=True)
    return mmh3.hash64(data, seed=KEY_SEED, signed=False)[0]
