"""Client authentication: tokens, each with a role (issue 13, item 3 in part).

A daemon started with ``--client-tokens FILE`` serves only clients whose hello carries
one of the file's tokens (``connect(token=...)``, or ``$SKUEUE_TOKEN`` for the API and
the CLI).  The file has one ``ROLE TOKEN`` per line (blank lines and ``#`` comments
skipped): ``client`` tokens may enqueue, dequeue, lease and ask for stats; ``admin``
tokens may also make the daemon join or leave a cluster.  A client without a good token
gets one error (``unauthorized``) and is disconnected; a client token that asks for
join or leave gets ``unauthorized`` for that request and is served on.  The error says
what was wrong with what the client showed (:func:`refusal_message`): a token that is
not one of the file's is "refused", not told to set ``$SKUEUE_TOKEN`` (it did), and a
certificate shown to a daemon without ``--tls-client-ca`` is said not to count.

Tokens are compared in constant time, and are at least ``TOKEN_CHARS_MIN`` characters
(``skueue keygen`` makes good ones).  Without TLS they cross the network in the clear:
this keeps strangers out of a private network, it does not stop an eavesdropper.
"""

from __future__ import annotations

import hmac
from pathlib import Path

import attrs

from skueue.runtime.errors import DaemonError
from skueue.runtime.security.secret_files import entries

ROLES = ("client", "admin")
TOKEN_CHARS_MIN = 16
TOKEN_CHARS_MAX = 256
TOKENS_MAX = 1024


@attrs.frozen
class ClientTokens:
    tokens: tuple[tuple[str, str], ...]  # (role, token)

    @classmethod
    def load(cls, path: Path) -> ClientTokens:
        tokens = []
        for number, line in entries(path, "--client-tokens"):
            role, _, token = line.partition(" ")
            token = token.strip()
            if role not in ROLES or not TOKEN_CHARS_MIN <= len(token) <= TOKEN_CHARS_MAX:
                raise DaemonError(
                    f"--client-tokens {path}, line {number}: expected ROLE TOKEN, ROLE one of "
                    f"{', '.join(ROLES)} and a token of {TOKEN_CHARS_MIN} to {TOKEN_CHARS_MAX} "
                    "characters (skueue keygen makes one)"
                )
            tokens.append((role, token))
        if not 1 <= len(tokens) <= TOKENS_MAX:
            raise DaemonError(f"--client-tokens {path}: expected 1 to {TOKENS_MAX} tokens")
        return cls(tuple(tokens))

    def role_of(self, token: object) -> str | None:
        """The role of ``token`` (None: not one of ours).  Every token is compared, so the
        time taken says nothing of which one came close."""
        if type(token) is not str:
            return None
        found = None
        given = token.encode("utf-8", "surrogatepass")
        for role, known in self.tokens:
            if hmac.compare_digest(given, known.encode()):
                found = role
        return found


# What a client that showed nothing (good) needs, by (tokens taken, certificates taken).
NEEDS = {
    (True, False): "a token: pass connect(token=...) or set $SKUEUE_TOKEN",
    (False, True): (
        "a TLS client certificate signed by its --tls-client-ca: pass "
        "connect(tls=...) with one, or set $SKUEUE_TLS_CERT and $SKUEUE_TLS_KEY"
    ),
    (True, True): (
        "a token or a TLS client certificate: pass connect(token=...) or set "
        "$SKUEUE_TOKEN, or present a certificate signed by its --tls-client-ca"
    ),
}
TOKEN_REFUSED = (
    "the token sent was refused: it is not one of this daemon's --client-tokens (check "
    "$SKUEUE_TOKEN or connect(token=...))"
)
TOKENS_NOT_TAKEN = "this daemon takes no tokens (it was started without --client-tokens)"
CERTIFICATE_NOT_SIGNED = (
    "the TLS client certificate presented is not signed by this daemon's --tls-client-ca"
)
CERTIFICATES_NOT_CHECKED = (
    "this daemon does not check TLS client certificates (it was started without "
    "--tls-client-ca), so the one presented does not count"
)


def refusal_message(
    *, tokens: bool, certificates: bool, token_sent: bool, certificate_sent: bool, tls: bool
) -> str:
    """Why a client is refused, from what the daemon takes (``tokens``: it has
    ``--client-tokens``; ``certificates``: ``--tls-client-ca``) and what the client
    showed.  ``tls``: the connection is TLS (a certificate could have been shown; the
    daemon asks for one only with ``--tls-ca`` or ``--tls-client-ca``)."""
    assert tokens or certificates, "a daemon that takes neither serves everyone"
    said = []
    if token_sent:
        said.append(TOKEN_REFUSED if tokens else TOKENS_NOT_TAKEN)
    if certificate_sent:
        said.append(CERTIFICATE_NOT_SIGNED if certificates else CERTIFICATES_NOT_CHECKED)
    if token_sent and tokens:
        # It knows how to send a token: not "set $SKUEUE_TOKEN" again, only what else would do.
        if certificates and not certificate_sent:
            said.append("or present a TLS client certificate signed by its --tls-client-ca")
        return "; ".join(said)
    needs = f"this daemon serves only clients with {NEEDS[(tokens, certificates)]}"
    if not said and tls and not certificates:
        # A client with a certificate that was not asked for cannot tell it was not looked at.
        needs += " (it does not check TLS client certificates: it has no --tls-client-ca)"
    return "; ".join([*said, needs])
