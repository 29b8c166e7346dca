"""The first frame a client sends: ``["hello-client", version, {options}]`` (the options
are listed in :mod:`skueue.wire.client_protocol`), built and checked by both sides."""

from __future__ import annotations

from typing import Any

import attrs

from skueue.core.errors import RemoteProtocolError

PROTOCOL_VERSION = 3
VERSIONS = (3,)  # hellos this daemon serves (version 3: issue 29, wire/client_protocol.py)


@attrs.frozen
class ClientHello:
    version: int
    request_timeout_s: float | None = None
    admin: bool = False
    # Names the client's session: its requests are unique by (session, rid) across its
    # connections, so that a retry gets the first attempt's outcome (host/retries.py).
    session: str | None = None
    token: str | None = None  # the client's credential (runtime/security/client_auth.py)
    # The process the session belongs to, once welcomed: a daemon that does not serve
    # it (any more: a failover) answers where it is served now, code ``moved``.
    process: str | None = None

    def frame(self) -> list[Any]:
        options: dict[str, Any] = {}
        if self.request_timeout_s is not None:
            # At least 1: a timeout under half a millisecond is still a timeout.
            options["request_timeout_ms"] = max(1, round(self.request_timeout_s * 1000))
        if self.admin:
            options["admin"] = True
        if self.session is not None:
            options["session"] = self.session
        if self.token is not None:
            options["token"] = self.token
        if self.process is not None:
            options["process"] = self.process
        return ["hello-client", self.version, options]


SESSION_CHARS_MAX = 64
TOKEN_CHARS_MAX = 256
PROCESS_CHARS_MAX = 256  # a process id: an address, or an --id


def parse_client_hello(frame: Any) -> ClientHello:
    """``["hello-client", version, {options}?]``; an unsupported version is refused."""
    if not isinstance(frame, list) or frame[:1] != ["hello-client"] or len(frame) not in (2, 3):
        raise RemoteProtocolError('hello: expected ["hello-client", version, {options}]')
    version = frame[1]
    if type(version) is not int or version not in VERSIONS:
        raise RemoteProtocolError(
            f"client protocol version {version!r:.20} is not supported; this daemon speaks "
            f"versions {', '.join(map(str, VERSIONS))}: upgrade the client or the daemon"
        )
    options = frame[2] if len(frame) == 3 else {}
    if not isinstance(options, dict):
        raise RemoteProtocolError("hello: the options must be a map")
    timeout_ms = options.get("request_timeout_ms")
    if timeout_ms is not None and (type(timeout_ms) is not int or timeout_ms <= 0):
        raise RemoteProtocolError("hello: request_timeout_ms must be a positive integer")
    admin = options.get("admin", False)
    if type(admin) is not bool:
        raise RemoteProtocolError("hello: admin must be true or false")
    session = options.get("session")
    if session is not None and (
        type(session) is not str or not 0 < len(session) <= SESSION_CHARS_MAX
    ):
        raise RemoteProtocolError(
            f"hello: session must be a string of 1 to {SESSION_CHARS_MAX} characters"
        )
    token = options.get("token")
    if token is not None and (type(token) is not str or not 0 < len(token) <= TOKEN_CHARS_MAX):
        raise RemoteProtocolError(
            f"hello: token must be a string of 1 to {TOKEN_CHARS_MAX} characters"
        )
    process = options.get("process")
    if process is not None and (
        type(process) is not str or not 0 < len(process) <= PROCESS_CHARS_MAX
    ):
        raise RemoteProtocolError(
            f"hello: process must be a string of 1 to {PROCESS_CHARS_MAX} characters"
        )
    timeout_s = None if timeout_ms is None else timeout_ms / 1000
    return ClientHello(version, timeout_s, admin, session, token, process)
