"""The core's errors, split by blame (ARCHITECTURE.md, style rule 4).

:class:`PeerError` is the sender's fault: a message that is malformed or impossible in
the receiver's current state.  The core checks every message before it changes any
state, so after a ``PeerError`` the process is exactly as before; a driver logs it once,
drops the link it came on and carries on.

Any other :class:`ProtocolError` is a state a correct run never reaches on our side: our
own bug, and it fails loudly.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A state a correct run never reaches: our bug (unless it is a :class:`PeerError`)."""


class PeerError(ProtocolError):
    """A peer sent a message that is malformed or impossible here: the blame is the
    sender's.  Raised before the receiver changed anything, so the process is unchanged
    and stays correct; drop the link and go on."""
