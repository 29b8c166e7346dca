"""Queue position -> DHT key (SPEC §4, paper Lemma 4).

Theory of operation: a position ``p`` maps to the point ``k(p) = h'(p)`` on the cycle, and
the node ``pred(k(p))`` stores the entry.  ``h'`` is a public pseudorandom hash, so every
process computes the same key without asking anyone, and consecutive positions scatter
over the cycle, which spreads the entries evenly over the nodes (fairness, Corollary 19).

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


def position_key(position: int) -> int:
    """The key of queue (or stack) position ``position``: a label in ``[0, 2**64)``.

    Positions start at 1 (SPEC §6); anything else is a bug of the caller, so it fails loudly.
    """
    if not 1 <= position <= POSITION_MAX:
        raise ValueError(f"position {position} is not in [1, 2**63)")
    data = position.to_bytes(8, "little", signed=True)
    return mmh3.hash64(data, seed=KEY_SEED, signed=False)[0]
