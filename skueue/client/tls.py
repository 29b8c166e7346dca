"""TLS for clients: which context a connection uses (issue 13, item 2).

``connect(tls=...)`` takes ``None`` (the default: TLS when ``$SKUEUE_TLS_CA`` is set,
plaintext otherwise), ``False`` (plaintext), ``True`` (TLS, trusting
``$SKUEUE_TLS_CA`` if set, else the system's CAs) or an :class:`ssl.SSLContext` of the
caller's.  ``$SKUEUE_TLS_CERT`` and ``$SKUEUE_TLS_KEY`` add a client certificate (for a
daemon started with ``--tls-client-ca``).  :func:`client_context` builds the same from
file names (the command line's ``--tls-ca``, ``--tls-cert``, ``--tls-key``).

The daemon's certificate is checked against the host name or IP address the client
dials, as HTTPS does (``skueue certs --host`` puts the addresses in the certificate).
"""

from __future__ import annotations

import os
import ssl

from skueue.client.errors import RequestRejected
from skueue.wire.errors import tls_file_error

TLS_ENV = ("SKUEUE_TLS_CA", "SKUEUE_TLS_CERT", "SKUEUE_TLS_KEY")


def client_context(
    ca: str | None = None, cert: str | None = None, key: str | None = None
) -> ssl.SSLContext:
    """A client's TLS context: trusting ``ca`` (a PEM file; None: the system's CAs), with
    the client certificate ``cert`` and its key ``key`` if given.  A file that cannot be
    read is :class:`RequestRejected` with one line."""
    if (cert is None) != (key is None) and cert is None:
        raise RequestRejected("a TLS client key needs its certificate (--tls-cert)")
    try:
        context = ssl.create_default_context(cafile=ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if cert is not None:
            context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        what = " ".join(f for f in (ca, cert, key) if f)
        raise RequestRejected(f"TLS files {what}: {tls_file_error(e)}") from None
    return context


def resolve(tls: bool | ssl.SSLContext | None) -> ssl.SSLContext | None:
    """The context ``connect(tls=...)`` means (None: plaintext)."""
    if isinstance(tls, ssl.SSLContext):
        return tls
    if tls is False:
        return None
    ca, cert, key = (os.environ.get(name) or None for name in TLS_ENV)
    if tls is None and ca is None:
        return None
    return client_context(ca, cert, key)
