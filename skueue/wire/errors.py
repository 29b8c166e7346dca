"""Errors split by blame (h11 style).

:class:`RemoteProtocolError` is bad input from a peer or a client: the runtime logs one
warning, answers an error where somebody waits, closes that connection and keeps
serving everyone else.  Anything else raised inside the runtime is our own bug and
fails loudly.
"""

from __future__ import annotations

import ssl


class RemoteProtocolError(Exception):
    """The other side sent something we cannot accept.

    ``rid`` is the request id of the client request it concerns, when there is one, so
    that the error reply reaches the caller waiting for it.
    """

    def __init__(self, message: str, rid: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.rid = rid


def tls_file_error(e: BaseException) -> str:
    """One line for what went wrong reading TLS files or setting up TLS (an ssl error's
    reason, an OS error's text), for the daemon's and the client's messages alike."""
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e)
