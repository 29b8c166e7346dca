"""Errors split by blame (ARCHITECTURE.md, style rule 4; h11's ``RemoteProtocolError``).

:class:`RemoteProtocolError` is their fault: bad input from a peer or a client.  Every
check that raises it runs before any state changes (the core checks a peer's message
before it applies it; the wire decodes a frame whole before anyone acts on it), so the
receiver is exactly as before.  The runtime logs it once, answers where somebody waits,
drops that link or connection and serves everyone else.

A :class:`ProtocolError` is our fault: a state a correct run never reaches on our side.
It fails loudly.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A state a correct run never reaches: our bug."""


class RemoteProtocolError(Exception):
    """Bad input from a peer or a client, raised before any state changed: the runtime
    logs it, answers where someone waits (``rid``: the client request it concerns), and
    drops the link or connection it came on."""

    def __init__(self, message: str, rid: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.rid = rid
