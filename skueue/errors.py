"""The core's error for things a correct run never does."""

from __future__ import annotations


class ProtocolError(Exception):
    """A message that cannot happen in a correct run (our bug or a misbehaving peer)."""
