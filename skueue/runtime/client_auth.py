"""Client authentication: tokens, each with a role (issue 13, item 3 in part).

A daemon started with ``--client-tokens FILE`` serves only clients whose hello carries
one of the file's tokens (``connect(token=...)``, or ``$SKUEUE_TOKEN`` for the API and
the CLI).  The file has one ``ROLE TOKEN`` per line (blank lines and ``#`` comments
skipped): ``client`` tokens may enqueue, dequeue, lease and ask for stats; ``admin``
tokens may also make the daemon join or leave a cluster.  A client without a good token
gets one error (``unauthorized``) and is disconnected; a client token that asks for
join or leave gets ``unauthorized`` for that request and is served on.

Tokens are compared in constant time, and are at least ``TOKEN_CHARS_MIN`` characters
(``skueue keygen`` makes good ones).  Without TLS they cross the network in the clear:
this keeps strangers out of a private network, it does not stop an eavesdropper.
"""

from __future__ import annotations

import hmac
from pathlib import Path

import attrs

from skueue.runtime.errors import DaemonError
from skueue.runtime.secret_files import entries

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
