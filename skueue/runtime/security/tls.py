"""TLS on every connection of a daemon, peers and clients alike (issue 13, item 2).

Theory of operation
-------------------
A daemon started with ``--tls-cert FILE --tls-key FILE`` wraps every connection it
accepts and every peer link it opens in TLS (the standard library's ``ssl`` through
``trio.SSLStream``) *before* the first frame: the hellos, the cluster-key handshake
(:mod:`skueue.runtime.security.peer_auth`) and every frame after them travel inside it.  So the
key handshake still runs (defense in depth), and TLS's record MACs authenticate every
frame after it: a byte changed or a record replayed on the path breaks the connection,
which the reliable links make good (:mod:`skueue.runtime.network.link_sender`).

Certificates (``skueue certs`` makes a CA and certificates signed by it) carry a role in
their subject's organizational unit (``OU``):

- ``--tls-ca FILE``: peer links are mutual TLS.  Each end presents its certificate, and
  the other takes it only if it is signed by this CA and says ``OU=peer``.  Host names
  are not checked on peer links: members dial the addresses the member directory
  gossips, which may be advertised ones (NAT, a proxy, ``--advertise``) that the
  certificate cannot know; a certificate of the cluster's own CA with ``OU=peer`` *is*
  what makes a member (together with the cluster key).  Without ``--tls-ca`` a peer's
  certificate is not checked: the links are encrypted against eavesdroppers, but an
  active attacker on the path could sit in the middle (the daemon warns at start).
- ``--tls-client-ca FILE``: a client may present a certificate signed by this CA instead
  of a token; ``OU=admin`` (or ``OU=peer``: a member's own certificate, on its host) gives
  the admin role, anything else the client role.  Without ``--client-tokens`` a client
  must present one.  (It may be the same file as ``--tls-ca``; the ``OU`` keeps a
  client's certificate from passing for a member's.)

Certificates are taken as signed directly by the CA (what ``skueue certs`` makes): the
CA a certificate came from is told by its issuer name, so the two CA files must not
share a subject name unless they are the same CA.

A connection that speaks plaintext to a TLS daemon gets one plaintext error frame (so a
plaintext skueued or client prints why) and one warning in the log; a TLS hello sent to
a plaintext daemon is recognised by its first bytes (:func:`looks_like_tls`).  The TLS
handshake runs within ``handshake_timeout_s`` and counts as a connection that has not
said who it is (``hello_pending_max``).
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import attrs
import trio

from skueue.runtime.errors import DaemonError
from skueue.wire.errors import tls_file_error

PEER_UNIT = "peer"
ADMIN_UNITS = ("admin", "peer")
# The first byte of a TLS record carrying a handshake (RFC 8446, 5.1): what a TLS
# ClientHello starts with.  A skueue frame starts with a 4-byte big-endian length, which
# would be over 350 MB with this first byte: never a frame (the limit is 16 MiB).
TLS_HANDSHAKE_RECORD = 0x16

Subject = tuple[tuple[tuple[str, str], ...], ...]


def looks_like_tls(first_bytes: bytes | bytearray) -> bool:
    return first_bytes[:1] == bytes([TLS_HANDSHAKE_RECORD])


@attrs.frozen
class TlsFiles:
    """What the command line names (``skueued --tls-*``)."""

    cert: Path
    key: Path
    ca: Path | None = None
    client_ca: Path | None = None


@attrs.frozen
class DaemonTls:
    """The contexts of one daemon, and who its CAs are."""

    server: ssl.SSLContext  # connections it accepts
    opener: ssl.SSLContext  # peer links it opens
    peer_issuers: frozenset[Subject] | None  # None: peers' certificates are not checked
    client_issuers: frozenset[Subject] | None  # None: clients present no certificate

    @classmethod
    def load(cls, files: TlsFiles) -> DaemonTls:
        """Read the files; a problem with any of them is one line (DaemonError)."""
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        opener = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for context in (server, opener):
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            try:
                context.load_cert_chain(files.cert, files.key)
            except (OSError, ssl.SSLError) as e:
                raise DaemonError(
                    f"--tls-cert {files.cert} / --tls-key {files.key}: {tls_file_error(e)}"
                ) from None
        # Peer links are checked below (CA and OU), not by host name: see the docstring.
        opener.check_hostname = False
        opener.verify_mode = ssl.CERT_NONE
        peer_issuers = client_issuers = None
        if files.ca is not None:
            peer_issuers = _load_ca(server, files.ca, "--tls-ca")
            _load_ca(opener, files.ca, "--tls-ca")
            opener.verify_mode = ssl.CERT_REQUIRED
        if files.client_ca is not None:
            client_issuers = _load_ca(server, files.client_ca, "--tls-client-ca")
        if (
            peer_issuers is not None
            and client_issuers is not None
            and peer_issuers != client_issuers
            and peer_issuers & client_issuers
        ):
            raise DaemonError(
                "--tls-ca and --tls-client-ca are different CAs with the same subject "
                "name: give them distinct names, or use one CA for both"
            )
        if peer_issuers is not None or client_issuers is not None:
            # Optional, not required: a client may come with a token instead; a peer
            # without a certificate is refused after the handshake, with one line.
            server.verify_mode = ssl.CERT_OPTIONAL
        return cls(server, opener, peer_issuers, client_issuers)

    def peer_refusal(self, stream: trio.SSLStream[Any]) -> str | None:
        """Why the other end of a peer link is not a member (None: it is, or peers'
        certificates are not checked)."""
        if self.peer_issuers is None:
            return None
        cert = stream.getpeercert()
        if not cert:
            return "it presented no TLS certificate (peer links are mutual TLS: --tls-ca)"
        if cert.get("issuer") not in self.peer_issuers:
            return "its TLS certificate is not signed by this daemon's --tls-ca"
        if PEER_UNIT not in _units(cert):
            return "its TLS certificate is not a member's (no OU=peer)"
        return None

    def client_role(self, stream: trio.SSLStream[Any]) -> str | None:
        """The role a client's certificate gives (None: it has none that counts here)."""
        if self.client_issuers is None:
            return None
        cert = stream.getpeercert()
        if not cert or cert.get("issuer") not in self.client_issuers:
            return None
        return "admin" if set(ADMIN_UNITS) & set(_units(cert)) else "client"


def _load_ca(context: ssl.SSLContext, path: Path, option: str) -> frozenset[Subject]:
    """Trust the CA certificates of ``path`` in ``context``; their subjects."""
    alone = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        alone.load_verify_locations(cafile=str(path))
        context.load_verify_locations(cafile=str(path))
    except (OSError, ssl.SSLError) as e:
        raise DaemonError(f"{option} {path}: {tls_file_error(e)}") from None
    subjects: frozenset[Subject] = frozenset(
        c["subject"]  # type: ignore[misc]
        for c in alone.get_ca_certs()
    )
    if not subjects:
        raise DaemonError(f"{option} {path}: no CA certificate in it")
    return subjects


def _units(cert: dict[str, Any]) -> list[str]:
    return [
        value
        for rdn in cert.get("subject", ())
        for name, value in rdn
        if name == "organizationalUnitName"
    ]



def socket_of(stream: trio.abc.Stream) -> trio.socket.SocketType:
    """The TCP socket under ``stream`` (a socket stream, or TLS over one)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    assert isinstance(stream, trio.SocketStream), stream
    return stream.socket


def tls_failure(e: BaseException) -> str:
    """One line for a failed TLS handshake (trio wraps the ``ssl`` error)."""
    cause = e.__cause__ if e.__cause__ is not None else e
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return str(cause) or type(cause).__name__


# What an opener's TLS failure says when trying again cannot help: the other end speaks
# no TLS, or refuses our certificate (or we its).  Anything else (a reset, a record
# changed on the path) is tried again.
NOT_TLS = ("WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST")
CERTIFICATE_REFUSED = (
    "CERTIFICATE_VERIFY_FAILED", "ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE",
    "ALERT_CERTIFICATE_REQUIRED", "ALERT_CERTIFICATE_UNKNOWN", "ALERT_HANDSHAKE_FAILURE",
)  # fmt: skip


def refused_for_good(reason: str) -> str | None:
    """What an opener's TLS failure means when trying again cannot help (None: it can)."""
    if any(r in reason.upper() for r in NOT_TLS):
        return f"does not speak TLS ({reason})"
    if any(r in reason.upper() for r in CERTIFICATE_REFUSED):
        return f"refused TLS with this daemon ({reason}): check both certificates' CA"
    return None


async def peek(stream: trio.SocketStream, count: int) -> bytes:
    """The first bytes waiting on ``stream``, left there for whoever reads next (b"":
    the other end closed)."""
    return await stream.socket.recv(count, socket.MSG_PEEK)
