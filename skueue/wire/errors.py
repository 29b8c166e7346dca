"""TLS trouble in one line, for the daemon's and the client's messages alike.

(Bad input from a peer or a client is :class:`skueue.core.errors.RemoteProtocolError`,
one type from the core's checks up to the wire's codecs.)
"""

from __future__ import annotations

import ssl


def tls_file_error(e: BaseException) -> str:
    """One line for what went wrong reading TLS files or setting up TLS (an ssl error's
    reason, an OS error's text), for the daemon's and the client's messages alike."""
    if isinstance(e, ssl.SSLError):
        return e.reason or str(e)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e)
