"""Opening a connection to a daemon: TCP, the hello, and its welcome checked.

Used for a client's first connection and for every reconnect after one broke.
"""

from __future__ import annotations

import ssl
from typing import Any

import anyio
import anyio.abc
import attrs

from skueue.client import asyncio_stream
from skueue.client.asyncio_stream import running_asyncio
from skueue.client.errors import (
    BadAddress,
    NodeUnavailable,
    NodeUnreachable,
    RequestRejected,
    error_from,
    reason,
)
from skueue.core.errors import RemoteProtocolError
from skueue.host.address import AddressError, parse_address
from skueue.host.replies import UNAUTHORIZED, ErrorReply, Welcome
from skueue.wire.client_codec import decode_reply
from skueue.wire.client_hello import ClientHello
from skueue.wire.framing import FrameDecoder, pack


@attrs.frozen
class Opened:
    stream: anyio.abc.ByteStream
    decoder: FrameDecoder
    welcome: Welcome
    leftover: list[Any]  # frames that came in with the welcome


async def open_connection(
    target: str, hello: ClientHello, timeout_s: float, tls: ssl.SSLContext | None = None
) -> Opened:
    """Connect to ``target`` (with TLS when ``tls`` is given, checking the daemon's
    certificate against the address dialled) and say ``hello``; raises
    :class:`NodeUnreachable` (or :class:`NodeUnavailable` when the daemon refuses for
    now) with one line."""
    try:
        addr = parse_address(target)
    except AddressError as e:
        raise BadAddress(str(e)) from None
    try:
        with anyio.fail_after(timeout_s):
            if tls is None and running_asyncio():
                stream: anyio.abc.ByteStream = await asyncio_stream.connect(addr.host, addr.port)
            elif tls is None:
                stream = await anyio.connect_tcp(addr.host, addr.port)
            else:
                stream = await anyio.connect_tcp(
                    addr.host, addr.port, ssl_context=tls, tls_hostname=addr.host
                )
    except (OSError, TimeoutError, anyio.BrokenResourceError, anyio.EndOfStream) as e:
        raise NodeUnreachable(f"cannot reach skueued at {target}: {reason(e)}") from None
    try:
        return await _greet(stream, target, hello, timeout_s)
    except BaseException:
        await anyio.aclose_forcefully(stream)
        raise


async def _greet(
    stream: anyio.abc.ByteStream, target: str, hello: ClientHello, timeout_s: float
) -> Opened:
    decoder = FrameDecoder()
    leftover: list[Any] = []
    try:
        with anyio.fail_after(timeout_s):
            await stream.send(pack(hello.frame()))
            welcome: Any = None
            while welcome is None:
                got = decoder.feed(await stream.receive())
                if got:
                    welcome, leftover = got[0], got[1:]
    except (
        OSError,
        TimeoutError,
        anyio.EndOfStream,
        anyio.BrokenResourceError,
        RemoteProtocolError,
    ) as e:
        raise NodeUnreachable(f"{target} did not greet us as skueued: {reason(e)}") from None
    try:
        greeting = decode_reply(welcome)
    except RemoteProtocolError:
        greeting = None
    if isinstance(greeting, ErrorReply):
        if greeting.code == UNAUTHORIZED:
            raise RequestRejected(f"{target}: {greeting.message}")
        refusal = error_from(greeting, target)
        if isinstance(refusal, NodeUnavailable):
            raise refusal
        raise NodeUnreachable(f"{target} refused the connection: {greeting.message!s:.300}")
    if not isinstance(greeting, Welcome):
        raise NodeUnreachable(f"{target} did not greet us as skueued: {welcome!r:.80}")
    return Opened(stream, decoder, greeting, leftover)
