"""Peer authentication: a cluster key, and a mutual challenge-response on every peer link
(issue 13, item 1).

Theory of operation
-------------------
Every member of a cluster holds the same secret, a 32-byte key in a file
(``skueued --cluster-key FILE``; ``skueue keygen`` makes one).  When a daemon opens a
link to another:

1. the opener's hello carries a fresh random challenge ``co``;
2. the acceptor's hello answers with its own fresh challenge ``ca`` and the proof
   ``HMAC(key, "skueue-peer accept" | co | ca | opener id | acceptor id)``;
3. the opener checks it, and its first frame is ``["auth-peer", proof]`` with
   ``HMAC(key, "skueue-peer open" | ca | co | opener id | acceptor id)``.

The acceptor takes no frame of the link, and tells its owner nothing of it, before that
proof checks out.  Both challenges are new for every connection, so a recorded
handshake replayed gets nowhere (its proof answers another challenge); the roles are in
the MAC, so a proof cannot be reflected back; the ids are in it, so it cannot be moved to
a link between two other members.  A daemon without a key and one with a key refuse each
other, in one line.

Rotation: the key file may hold several keys, one per line.  The first signs, every one
is accepted, so a cluster rolls over to a new key in three rolling restarts (README):
add the new key second, then move it first, then drop the old one.

What this does not do (yet): authenticate every frame after the handshake, or encrypt
them.  A link is a TCP connection, so an attacker who can inject into an established
connection (on the path between two members) is not stopped; TLS is the next step.
"""

from __future__ import annotations

import hmac
import secrets
from hashlib import sha256
from pathlib import Path
from typing import Any

import attrs

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.errors import DaemonError
from skueue.runtime.security.secret_files import entries

KEY_BYTES = 32
KEYS_MAX = 4  # keys one file may hold (a rotation needs two)
CHALLENGE_BYTES = 16
AUTH_FRAME = "auth-peer"


def generate_key() -> str:
    """A new cluster key, as its file holds it (hex)."""
    return secrets.token_hex(KEY_BYTES)


def new_challenge() -> str:
    return secrets.token_hex(CHALLENGE_BYTES)


@attrs.frozen
class ClusterKeys:
    """The keys of one daemon: the first signs, any verifies."""

    keys: tuple[bytes, ...]

    @classmethod
    def load(cls, path: Path) -> ClusterKeys:
        """Read a key file: one hex key per line; blank lines and ``#`` comments skipped."""
        keys = []
        for number, line in entries(path, "--cluster-key"):
            try:
                key = bytes.fromhex(line)
            except ValueError:
                key = b""
            if len(key) != KEY_BYTES:
                raise DaemonError(
                    f"--cluster-key {path}, line {number}: expected {2 * KEY_BYTES} hex "
                    "digits (make a key with: skueue keygen)"
                )
            keys.append(key)
        if not 1 <= len(keys) <= KEYS_MAX:
            raise DaemonError(
                f"--cluster-key {path}: expected 1 to {KEYS_MAX} keys, not {len(keys)}"
            )
        return cls(tuple(keys))

    def proof(self, role: str, mine: str, theirs: str, opener: str, acceptor: str) -> str:
        return _mac(self.keys[0], role, mine, theirs, opener, acceptor)

    def verify(
        self, proof: Any, role: str, mine: str, theirs: str, opener: str, acceptor: str
    ) -> bool:
        if type(proof) is not str:
            return False
        # As bytes: compare_digest refuses str with non-ASCII characters (a TypeError a
        # peer could provoke at will).
        given = proof.encode("utf-8", "surrogatepass")
        return any(
            hmac.compare_digest(given, _mac(k, role, mine, theirs, opener, acceptor).encode())
            for k in self.keys
        )


def _mac(key: bytes, role: str, mine: str, theirs: str, opener: str, acceptor: str) -> str:
    parts = ("skueue-peer " + role, mine, theirs, opener, acceptor)
    message = "\0".join(parts).encode("utf-8", "surrogatepass")
    return hmac.new(key, message, sha256).hexdigest()


def auth_map(x: Any) -> dict[str, Any]:
    """The optional last element of a peer hello: ``{"challenge": ..., "proof": ...}``."""
    if not isinstance(x, dict) or not set(x) <= {"challenge", "proof"}:
        raise RemoteProtocolError("hello-peer: the last field is a map of challenge, proof")
    for name in ("challenge", "proof"):
        value = x.get(name)
        if value is not None and (type(value) is not str or not 0 < len(value) <= 128):
            raise RemoteProtocolError(f"hello-peer: {name} must be a short string")
    return x


def mismatch(ours: ClusterKeys | None, peer: str) -> str:
    """What a daemon says when its peer's hello and its own key do not go together."""
    if ours is None:
        return (
            f"{peer} presents a cluster key and this daemon has none: start every member "
            "with the same --cluster-key"
        )
    return (
        f"{peer} has no cluster key and this daemon requires one: start every member "
        "with the same --cluster-key"
    )
