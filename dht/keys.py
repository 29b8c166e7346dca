"""Queue position -> DHT key (SPEC §4 and §10, paper Lemma 4).

Theory of operation: positions are grouped in *blocks* of ``POSITIONS_PER_BLOCK``
consecutive positions (block ``b`` holds ``b * B + 1 .. (b + 1) * B``), and every position
``p`` of queue ``q`` maps to the point ``k(q, p) = h'(q, block(p))`` on the cycle; the node
``pred(k(q, p))`` stores the entry.  Every named queue has its own positions, so the name
is part of the key (issue 12).  ``h'`` is a public pseudorandom hash, so every process
computes the same key without asking anyone, and consecutive *blocks* scatter over the
cycle, which spreads the entries evenly over the nodes (fairness, Corollary 19, now per
block).  A batch's run of positions falls in a few blocks, so its Puts and Gets reach a
few owners and travel as a few messages (issue 30; the argument is docs/dht_blocks.md).

Keys are therefore not distinct per position: the key only says *which* node stores an
entry, and every table keeps its entries by position (``dht/table.py``).

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

POSITIONS_PER_BLOCK = 64
"""Consecutive positions that share one DHT key (a power of two, so that priority levels,
``level << 59 | position`` in skueue/core/levels.py, never share a block).  64 by
measurement (docs/dht_blocks.md): a batch of 100 operations spans 2 or 3 blocks, and a
queue holding a few thousand elements still has its blocks spread over every process.
Every member of a cluster must use the same value: it decides where data lives (the input
log's version says which placement wrote it)."""


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


def block_of(position: int) -> int:
    """The block of ``position``: positions ``1..B`` are block 0, ``B+1..2B`` block 1."""
    return (position - 1) // POSITIONS_PER_BLOCK


def position_key(queue: str, position: int) -> int:
    """The key of ``queue``'s position ``position``, shared by its whole block: a label in
    ``[0, 2**64)``.

    Positions start at 1 (SPEC §6); anything else is a bug of the caller, so it fails loudly.
    """
    if not 1 <= position <= POSITION_MAX:
        raise ValueError(f"position {position} is not in [1, 2**63)")
    data = _prefix(queue) + block_of(position).to_bytes(8, "little", signed=True)
    return mmh3.hash64(data, seed=KEY_SEED, signed=False)[0]
