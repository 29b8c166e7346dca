"""Queue positions to DHT keys (SPEC §4): ``k(p) = h'(p)``, a public pseudorandom hash.

The key is an integer fraction of ``2**64`` like every label, so responsibility is an
exact integer comparison.  The seed differs from the label hash's so that keys and
labels are independent.
"""

from __future__ import annotations

import mmh3

KEY_SEED = 0x5EED


def position_key(position: int) -> int:
    """The DHT key of a queue or stack position (a positive integer)."""
    return mmh3.hash64(position.to_bytes(8, "little", signed=True), seed=KEY_SEED, signed=False)[0]
