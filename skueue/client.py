"""The embedded Python API: talk to a ``skueued`` from trio or asyncio code.

    async with skueue.connect("127.0.0.1:7400") as q:
        await q.enqueue(b"job-1")
        item = await q.dequeue()          # bytes, or None when the queue was empty

One connection carries any number of concurrent requests (each has a request id); a
reader task hands every reply to the task waiting for it.  It is written against anyio,
so the same code runs under trio and asyncio.  :func:`connect_blocking` wraps it for
plain scripts, and :func:`skueue.local.local_cluster` runs a whole cluster in-process.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import anyio.abc
import attrs
from anyio.from_thread import start_blocking_portal

from skueue.runtime.address import AddressError, parse_address
from skueue.runtime.client_protocol import PROTOCOL_VERSION
from skueue.runtime.errors import RemoteProtocolError
from skueue.runtime.framing import FrameDecoder, pack

DEFAULT_NODE = "127.0.0.1:7400"
CONNECT_TIMEOUT_S = 10.0


class SkueueError(Exception):
    """Base of every error the client raises."""


class NodeUnreachable(SkueueError):
    """The daemon could not be reached or the connection broke."""


class RequestRejected(SkueueError):
    """The daemon refused a request (bad value, over a limit)."""


@attrs.frozen
class Inserted:
    """Where an inserted element went: its rank in the serialization and its position."""

    ord: int
    position: int | None


@attrs.frozen
class Removed:
    """A removed element (None: the structure was empty), its rank and position."""

    value: bytes | None
    ord: int
    position: int | None


@attrs.define
class _Waiter:
    done: anyio.Event = attrs.field(factory=anyio.Event)
    reply: list[Any] | None = None
    error: SkueueError | None = None


class Client:
    """A connection to one daemon.  Create it with :func:`connect`."""

    def __init__(self, stream: anyio.abc.ByteStream, process_id: str, structure: str) -> None:
        self._stream = stream
        self.process_id = process_id
        self.structure = structure
        self._rids = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._broken: SkueueError | None = None

    # -- the API ----------------------------------------------------------------------

    async def enqueue(self, value: bytes) -> Inserted:
        return (await self.insert([value]))[0]

    async def dequeue(self) -> bytes | None:
        return (await self.remove(1))[0].value

    async def enqueue_many(self, values: Sequence[bytes]) -> list[Inserted]:
        return await self.insert(values)

    async def dequeue_many(self, count: int) -> list[bytes | None]:
        return [r.value for r in await self.remove(count)]

    # The stack speaks of push and pop; the daemon decides which structure it serves.
    push = enqueue
    pop = dequeue

    async def insert(self, values: Sequence[bytes]) -> list[Inserted]:
        values = list(values)
        for v in values:
            if not isinstance(v, bytes | bytearray | memoryview):
                raise TypeError(f"elements must be bytes, not {type(v).__name__}")
        if not values:
            return []
        reply = await self._request(["insert", None, [bytes(v) for v in values]])
        return [Inserted(r[0], r[1]) for r in reply[2]]

    async def remove(self, count: int) -> list[Removed]:
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be a non-negative integer, not {count!r}")
        if count == 0:
            return []
        reply = await self._request(["remove", None, count])
        return [Removed(r[0], r[1], r[2]) for r in reply[2]]

    async def stats(self) -> dict[str, Any]:
        reply = await self._request(["stats", None])
        stats: dict[str, Any] = reply[2]
        return stats

    async def leave(self) -> None:
        """Make the daemon hand its data to the others and exit; returns once it has."""
        await self._request(["leave", None])

    async def join(self, seed: str) -> None:
        """Make a daemon that is alone (and empty) join the cluster ``seed`` is in;
        returns once it is in the ring."""
        await self._request(["join", None, seed])

    # -- plumbing ---------------------------------------------------------------------

    async def _request(self, frame: list[Any]) -> list[Any]:
        if self._broken is not None:
            raise self._broken
        rid = next(self._rids)
        frame[1] = rid
        waiter = _Waiter()
        self._waiting[rid] = waiter
        try:
            async with self._send_lock:
                await self._stream.send(pack(frame))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
            self._waiting.pop(rid, None)
            raise NodeUnreachable(f"connection to {self.process_id} broke: {e}") from None
        await waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        assert waiter.reply is not None
        return waiter.reply

    async def _read_replies(self, decoder: FrameDecoder) -> None:
        error: SkueueError = NodeUnreachable(f"{self.process_id} closed the connection")
        try:
            while True:
                data = await self._stream.receive()
                for frame in decoder.feed(data):
                    self._deliver(frame)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        except RemoteProtocolError as e:
            error = NodeUnreachable(f"bad reply from {self.process_id}: {e}")
        finally:
            self._broken = error
            for waiter in self._waiting.values():
                waiter.error = error
                waiter.done.set()
            self._waiting.clear()

    def _deliver(self, frame: Any) -> None:
        if not isinstance(frame, list) or len(frame) < 3:
            raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
        kind, rid = frame[0], frame[1]
        if kind == "error" and rid is None:
            self._broken = RequestRejected(str(frame[2]))
            for pending in self._waiting.values():
                pending.error = self._broken
                pending.done.set()
            self._waiting.clear()
            return
        waiter = self._waiting.pop(rid) if type(rid) is int and rid in self._waiting else None
        if waiter is None:
            raise RemoteProtocolError(f"reply for unknown request {rid!r:.20}")
        if kind == "error":
            waiter.error = RequestRejected(str(frame[2]))
        else:
            waiter.reply = frame
        waiter.done.set()


@asynccontextmanager
async def connect(
    address: str | None = None, *, timeout_s: float = CONNECT_TIMEOUT_S
) -> AsyncIterator[Client]:
    """Connect to a daemon (default ``$SKUEUE_NODE``, else 127.0.0.1:7400)."""
    target = address or os.environ.get("SKUEUE_NODE") or DEFAULT_NODE
    try:
        addr = parse_address(target)
    except AddressError as e:
        raise SkueueError(str(e)) from None
    try:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(addr.host, addr.port)
    except (OSError, TimeoutError) as e:
        raise NodeUnreachable(f"cannot reach skueued at {target}: {_reason(e)}") from None
    decoder = FrameDecoder()
    async with stream:
        try:
            with anyio.fail_after(timeout_s):
                await stream.send(pack(["hello-client", PROTOCOL_VERSION]))
                welcome: Any = None
                while welcome is None:
                    got = decoder.feed(await stream.receive())
                    if got:
                        welcome = got[0]
                        leftover = got[1:]
        except (
            OSError,
            TimeoutError,
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            RemoteProtocolError,
        ) as e:
            raise NodeUnreachable(f"{target} did not greet us as skueued: {_reason(e)}") from None
        if not isinstance(welcome, list) or len(welcome) < 3 or welcome[0] != "welcome":
            message = welcome[2] if isinstance(welcome, list) and len(welcome) > 2 else welcome
            raise NodeUnreachable(f"{target} refused the connection: {message!r:.80}")
        client = Client(stream, str(welcome[1]), str(welcome[2]))
        async with anyio.create_task_group() as tg:
            for frame in leftover:
                client._deliver(frame)
            tg.start_soon(client._read_replies, decoder)
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()


def _reason(e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return "timed out"
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


class BlockingClient:
    """The same API for plain (non-async) code; each call blocks until its reply."""

    def __init__(self, portal: Any, client: Client) -> None:
        self._portal = portal
        self._client = client
        self.process_id = client.process_id
        self.structure = client.structure

    def enqueue(self, value: bytes) -> Inserted:
        return self._portal.call(self._client.enqueue, value)

    def dequeue(self) -> bytes | None:
        return self._portal.call(self._client.dequeue)

    def enqueue_many(self, values: Sequence[bytes]) -> list[Inserted]:
        return self._portal.call(self._client.enqueue_many, values)

    def dequeue_many(self, count: int) -> list[bytes | None]:
        return self._portal.call(self._client.dequeue_many, count)

    def remove(self, count: int) -> list[Removed]:
        return self._portal.call(self._client.remove, count)

    def stats(self) -> dict[str, Any]:
        return self._portal.call(self._client.stats)

    def leave(self) -> None:
        self._portal.call(self._client.leave)

    def join(self, seed: str) -> None:
        self._portal.call(self._client.join, seed)

    push = enqueue
    pop = dequeue


@contextmanager
def connect_blocking(
    address: str | None = None, *, timeout_s: float = CONNECT_TIMEOUT_S
) -> Iterator[BlockingClient]:
    """``with skueue.connect_blocking(addr) as q: q.enqueue(b"x")`` for scripts."""
    with (
        start_blocking_portal(backend="trio") as portal,
        portal.wrap_async_context_manager(connect(address, timeout_s=timeout_s)) as client,
    ):
        yield BlockingClient(portal, client)
