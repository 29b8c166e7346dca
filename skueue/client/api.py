"""The embedded Python API: talk to a ``skueued`` from trio or asyncio code.

    async with skueue.connect("127.0.0.1:7400") as q:
        await q.enqueue(b"job-1")
        item = await q.dequeue()          # bytes, or None when the queue was empty

One connection carries any number of concurrent requests (each has a request id); a
reader task hands every reply to the task waiting for it.  It is written against anyio,
so the same code runs under trio and asyncio.  :func:`connect_blocking` wraps it for
plain scripts, and :func:`skueue.cluster.inprocess.local_cluster` runs a whole cluster in-process.

Every request has a deadline (``request_timeout_s``, 15 s by default).  The daemon is
told the same timeout in the hello and answers a request it could not finish in time with
an error that says why; the client waits a little longer (``REPLY_GRACE_S``) so that this
more informative answer normally arrives first, and raises :class:`RequestTimeout` itself
otherwise.  A timed-out request may still take effect: its outcome is unknown.

Values are checked against the daemon's limits (sent in its welcome) before anything is
sent, so an oversized value fails alone and never costs the connection; large
``enqueue_many``/``dequeue_many`` calls are split into requests that each fit the frame
and per-request limits, sent one after another so their order is kept.
"""

from __future__ import annotations

import atexit
import itertools
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import attrs
from anyio.from_thread import start_blocking_portal

from skueue.runtime.address import AddressError, parse_address
from skueue.runtime.limits import Limits
from skueue.wire.client_protocol import (
    PROTOCOL_VERSION,
    ClientHello,
    ClientRequest,
    InsertRequest,
    JoinClusterRequest,
    LeaveRequest,
    RemoveRequest,
    StatsRequest,
)
from skueue.wire.client_replies import Done, ErrorReply, More, StatsReply, Welcome, parse_reply
from skueue.wire.errors import RemoteProtocolError
from skueue.wire.framing import FrameDecoder, pack

DEFAULT_NODE = "127.0.0.1:7400"
CONNECT_TIMEOUT_S = 10.0
DEFAULT_REQUEST_TIMEOUT_S = 15.0
# Extra wait past the request timeout, so that the daemon's own timeout error (which
# names the member that is down) normally arrives before the client gives up.
REPLY_GRACE_S = 2.0
# Room for a request frame's own fields (kind, rid, list header) and per-value headers.
FRAME_OVERHEAD_BYTES = 64
VALUE_OVERHEAD_BYTES = 5
# Room for a removed element's rank and position next to its value in a reply.
RESULT_OVERHEAD_BYTES = 32


class SkueueError(Exception):
    """Base of every error the client raises."""


class NodeUnreachable(SkueueError):
    """The daemon could not be reached or the connection broke."""


class NodeUnavailable(SkueueError):
    """The daemon is up but cannot serve now (it is leaving, or a member is down).

    Retryable: nothing was done for the request, so the same request may be sent again,
    to this daemon later or to another member now.
    """


class RequestRejected(SkueueError):
    """The daemon (or the client, checking the daemon's limits) refused a request:
    a bad value or argument, or one over a limit.  Retrying the same request fails again."""


class RequestTimeout(SkueueError):
    """No reply within the request timeout.  The outcome is unknown: an enqueue may still
    take effect, and a dequeue may have removed an element that is now lost."""


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
    results: list[Any] = attrs.field(factory=list)
    reply: Done | StatsReply | None = None
    error: SkueueError | None = None


def limits_from_welcome(welcome: Welcome) -> tuple[Limits, bool]:
    """The daemon's limits from its welcome, and whether it sent them (a daemon that does
    speaks the protocol with replies in pieces); the defaults where it did not."""
    defaults = Limits()
    advertised = welcome.limits
    if advertised is None:
        return defaults, False
    known = {}
    for name in ("value_bytes_max", "ops_per_request_max", "frame_bytes_max"):
        value = advertised.get(name)
        if type(value) is int and value > 0:
            known[name] = value
    return attrs.evolve(defaults, **known), True


class Client:
    """A connection to one daemon.  Create it with :func:`connect`."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        process_id: str,
        structure: str,
        *,
        address: str | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        limits: Limits | None = None,
        replies_in_pieces: bool = False,
    ) -> None:
        self._stream = stream
        self.process_id = process_id
        self.structure = structure
        self.address = address or process_id
        self.request_timeout_s = request_timeout_s
        self.limits = limits or Limits()
        self._rids = itertools.count(1)
        self._last_rid = 0
        self._waiting: dict[int, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._broken: SkueueError | None = None
        # The largest value a request may carry: the daemon's limit, and never more than
        # fits a frame on its own.
        self.value_bytes_max = min(
            self.limits.value_bytes_max,
            self.limits.frame_bytes_max - FRAME_OVERHEAD_BYTES - VALUE_OVERHEAD_BYTES,
        )
        # A daemon that splits its replies takes any count up to its per-request limit;
        # one that does not must fit every removed value into one reply frame.
        per_reply = self.limits.frame_bytes_max // (
            self.limits.value_bytes_max + RESULT_OVERHEAD_BYTES
        )
        self.remove_count_max = (
            self.limits.ops_per_request_max
            if replies_in_pieces
            else max(1, min(self.limits.ops_per_request_max, per_reply))
        )

    @property
    def name(self) -> str:
        """The daemon as error messages name it: its id, and its address if different."""
        if self.address == self.process_id:
            return self.process_id
        return f"{self.process_id} ({self.address})"

    # -- the API ----------------------------------------------------------------------

    async def enqueue(self, value: bytes) -> Inserted:
        return (await self.insert([value]))[0]

    async def dequeue(self) -> bytes | None:
        return (await self.remove(1))[0].value

    async def enqueue_many(self, values: Sequence[bytes]) -> list[Inserted]:
        return await self.insert(values)

    async def dequeue_many(self, count: int) -> list[bytes]:
        """Up to ``count`` elements, oldest first (a stack: newest first); fewer when the
        structure ran empty.  :meth:`remove` keeps the empty results and the positions."""
        return [
            r.value
            for r in await self._remove(count, stop_when_empty=True)
            if r.value is not None
        ]

    # The stack speaks of push and pop; the daemon decides which structure it serves.
    push = enqueue
    pop = dequeue

    async def insert(self, values: Sequence[bytes]) -> list[Inserted]:
        """Insert ``values`` in order; one :class:`Inserted` per value.  Every value is
        checked against the daemon's limit before any is sent."""
        checked = [self._checked_value(v) for v in values]
        out: list[Inserted] = []
        for chunk in self._insert_chunks(checked):
            results = await self._request(InsertRequest(0, chunk))
            out.extend(Inserted(r[0], r[1]) for r in results)
        return out

    async def remove(self, count: int) -> list[Removed]:
        """Perform ``count`` removals; one :class:`Removed` per removal, in order, its
        ``value`` None where the structure was empty."""
        return await self._remove(count, stop_when_empty=False)

    async def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = await self._request(StatsRequest(0))
        return stats

    async def leave(self) -> None:
        """Make the daemon hand its data to the others and exit; returns once it has."""
        await self._request(LeaveRequest(0))

    async def join(self, seed: str) -> None:
        """Make a daemon that is alone (and empty) join the cluster ``seed`` is in;
        returns once it is in the ring."""
        await self._request(JoinClusterRequest(0, seed))

    # -- checks and splitting ---------------------------------------------------------

    def _checked_value(self, v: Any) -> bytes:
        if not isinstance(v, bytes | bytearray | memoryview):
            raise TypeError(f"elements must be bytes, not {type(v).__name__}")
        value = bytes(v)
        if len(value) > self.value_bytes_max:
            raise RequestRejected(
                f"a value of {len(value)} bytes exceeds the limit of {self.value_bytes_max} "
                f"bytes per element (the daemon's value_bytes_max)"
            )
        return value

    def _insert_chunks(self, values: list[bytes]) -> list[list[bytes]]:
        """Consecutive runs of ``values``, each within the per-request count and the frame
        size."""
        budget = self.limits.frame_bytes_max - FRAME_OVERHEAD_BYTES
        chunks: list[list[bytes]] = []
        chunk: list[bytes] = []
        size = 0
        for v in values:
            cost = len(v) + VALUE_OVERHEAD_BYTES
            if chunk and (len(chunk) >= self.limits.ops_per_request_max or size + cost > budget):
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(v)
            size += cost
        if chunk:
            chunks.append(chunk)
        return chunks

    async def _remove(self, count: int, *, stop_when_empty: bool) -> list[Removed]:
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be a non-negative integer, not {count!r}")
        out: list[Removed] = []
        while len(out) < count:
            n = min(self.remove_count_max, count - len(out))
            results = await self._request(RemoveRequest(0, n))
            batch = [Removed(r[0], r[1], r[2]) for r in results]
            out.extend(batch)
            if stop_when_empty and any(r.value is None for r in batch):
                break
        return out

    # -- plumbing ---------------------------------------------------------------------

    async def _request(self, request: ClientRequest) -> Any:
        """Send one request and wait for its results (the pieces concatenated), or the
        stats object; raise the error the daemon answered with, or RequestTimeout."""
        if self._broken is not None:
            raise self._broken
        rid = next(self._rids)
        self._last_rid = rid
        blob = pack(attrs.evolve(request, rid=rid).frame())
        waiter = _Waiter()
        self._waiting[rid] = waiter
        sending = False
        try:
            with anyio.move_on_after(self.request_timeout_s + REPLY_GRACE_S):
                async with self._send_lock:
                    sending = True
                    await self._stream.send(blob)
                    sending = False
                await waiter.done.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
            self._break(NodeUnreachable(f"connection to {self.name} broke: {_reason(e)}"))
            raise NodeUnreachable(f"connection to {self.name} broke: {_reason(e)}") from None
        finally:
            self._waiting.pop(rid, None)
            if sending:
                # Cut off in the middle of a frame: the stream is out of step for good.
                self._break(
                    NodeUnreachable(f"connection to {self.name} abandoned: a send was cut off")
                )
        if not waiter.done.is_set():
            raise RequestTimeout(
                f"no reply from {self.name} within {self.request_timeout_s:g} s; "
                "the outcome is unknown"
            )
        if waiter.error is not None:
            raise waiter.error
        reply = waiter.reply
        if isinstance(reply, Done):
            return [*waiter.results, *reply.results]
        assert isinstance(reply, StatsReply)
        return reply.summary

    def _break(self, error: SkueueError) -> None:
        if self._broken is None:
            self._broken = error
        for waiter in self._waiting.values():
            if not waiter.done.is_set():  # an answer that already arrived stands
                waiter.error = self._broken
                waiter.done.set()
        self._waiting.clear()

    async def _read_replies(self, decoder: FrameDecoder) -> None:
        error: SkueueError = NodeUnreachable(f"{self.name} closed the connection")
        try:
            while True:
                data = await self._stream.receive()
                for frame in decoder.feed(data):
                    self._deliver(frame)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        except OSError as e:
            error = NodeUnreachable(f"connection to {self.name} broke: {_reason(e)}")
        except RemoteProtocolError as e:
            error = NodeUnreachable(f"bad reply from {self.name}: {e}")
        finally:
            self._break(error)

    def _deliver(self, frame: Any) -> None:
        reply = parse_reply(frame)
        if isinstance(reply, ErrorReply) and reply.rid is None:
            self._break(_error_from(reply, self.name))
            return
        if isinstance(reply, Welcome):
            raise RemoteProtocolError(f"unexpected reply {frame!r:.60}")
        rid = reply.rid
        if rid is None or not 0 < rid <= self._last_rid:
            raise RemoteProtocolError(f"reply for unknown request {rid!r:.20}")
        waiter = self._waiting.get(rid)
        if waiter is None:
            return  # a request we stopped waiting for (timed out or cancelled)
        if isinstance(reply, More):
            waiter.results.extend(reply.results)
            return
        del self._waiting[rid]  # answered: a break that follows does not change that
        if isinstance(reply, ErrorReply):
            waiter.error = _error_from(reply, self.name)
        else:
            waiter.reply = reply
        waiter.done.set()


def _error_from(reply: ErrorReply, name: str) -> SkueueError:
    """The client error for an error reply."""
    message, code = reply.message, reply.code
    if code == "timeout":
        return RequestTimeout(f"{name}: {message}; the outcome is unknown")
    if code == "unavailable":
        return NodeUnavailable(f"{name}: {message} (retryable)")
    return RequestRejected(message)


def resolve_address(address: str | None) -> str:
    """The address to use: ``address``, else ``$SKUEUE_NODE``, else the default."""
    return address or os.environ.get("SKUEUE_NODE") or DEFAULT_NODE


@asynccontextmanager
async def connect(
    address: str | None = None,
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
    request_timeout_s: float | None = None,
    admin: bool = False,
) -> AsyncIterator[Client]:
    """Connect to a daemon (default ``$SKUEUE_NODE``, else 127.0.0.1:7400).

    ``timeout_s`` bounds connecting and the greeting; ``request_timeout_s`` every request
    (:class:`RequestTimeout` past it; default ``DEFAULT_REQUEST_TIMEOUT_S``, 15 s).
    ``admin`` asks for the connection slot the daemon keeps for administrative commands
    (stats, join, leave)."""
    if request_timeout_s is None:
        request_timeout_s = DEFAULT_REQUEST_TIMEOUT_S
    if not request_timeout_s > 0:
        raise ValueError(f"request_timeout_s must be positive, not {request_timeout_s!r}")
    target = resolve_address(address)
    try:
        addr = parse_address(target)
    except AddressError as e:
        raise BadAddress(str(e)) from None
    try:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(addr.host, addr.port)
    except (OSError, TimeoutError) as e:
        raise NodeUnreachable(f"cannot reach skueued at {target}: {_reason(e)}") from None
    decoder = FrameDecoder()
    hello = ClientHello(PROTOCOL_VERSION, request_timeout_s, admin)
    async with stream:
        try:
            with anyio.fail_after(timeout_s):
                await stream.send(pack(hello.frame()))
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
        try:
            greeting = parse_reply(welcome)
        except RemoteProtocolError:
            greeting = None
        if isinstance(greeting, ErrorReply):
            refusal = _error_from(greeting, target)
            if isinstance(refusal, NodeUnavailable):
                raise refusal
            raise NodeUnreachable(f"{target} refused the connection: {greeting.message!r:.80}")
        if not isinstance(greeting, Welcome):
            raise NodeUnreachable(f"{target} did not greet us as skueued: {welcome!r:.80}")
        limits, in_pieces = limits_from_welcome(greeting)
        decoder.frame_bytes_max = limits.frame_bytes_max
        client = Client(
            stream,
            greeting.process_id,
            greeting.structure,
            address=target,
            request_timeout_s=request_timeout_s,
            limits=limits,
            replies_in_pieces=in_pieces,
        )
        async with anyio.create_task_group() as tg:
            try:
                for frame in leftover:
                    client._deliver(frame)
            except RemoteProtocolError as e:
                raise NodeUnreachable(f"bad reply from {client.name}: {e}") from None
            tg.start_soon(client._read_replies, decoder)
            try:
                yield client
            finally:
                tg.cancel_scope.cancel()
                # Requests still waiting (other tasks, or a blocking call that was
                # interrupted) end now, not at their timeout.
                client._break(NodeUnreachable(f"the connection to {client.name} was closed"))


class BadAddress(SkueueError, ValueError):
    """The address is not ``HOST:PORT``."""


def _reason(e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return "timed out"
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


class BlockingClient:
    """The same API for plain (non-async) code; each call blocks until its reply.

    Made by :func:`connect_blocking`; use it in a ``with`` block or call :meth:`close`.
    The connection lives in a trio loop on a thread of its own."""

    def __init__(self, address: str | None = None, **options: Any) -> None:
        self._exits = ExitStack()
        try:
            portal = self._exits.enter_context(start_blocking_portal(backend="trio"))
            client = self._exits.enter_context(
                portal.wrap_async_context_manager(connect(address, **options))
            )
        except BaseException:
            self._exits.close()
            raise
        self._portal = portal
        self._client = client
        self.process_id = client.process_id
        self.structure = client.structure
        self.address = client.address
        # A script that never calls close() must still exit: left to the garbage collector
        # at shutdown, the portal would wait for a thread that is no longer running.
        atexit.register(self.close)

    def close(self) -> None:
        """Close the connection and stop its thread; calling it again does nothing.
        A request still waiting (e.g. after Ctrl-C) ends with NodeUnreachable."""
        atexit.unregister(self.close)
        self._exits.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def enqueue(self, value: bytes) -> Inserted:
        return self._portal.call(self._client.enqueue, value)

    def dequeue(self) -> bytes | None:
        return self._portal.call(self._client.dequeue)

    def enqueue_many(self, values: Sequence[bytes]) -> list[Inserted]:
        return self._portal.call(self._client.enqueue_many, values)

    def dequeue_many(self, count: int) -> list[bytes]:
        return self._portal.call(self._client.dequeue_many, count)

    def insert(self, values: Sequence[bytes]) -> list[Inserted]:
        return self._portal.call(self._client.insert, values)

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


def connect_blocking(
    address: str | None = None,
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
    request_timeout_s: float | None = None,
    admin: bool = False,
) -> BlockingClient:
    """A connected :class:`BlockingClient` for scripts:

        with skueue.connect_blocking(addr) as q:
            q.enqueue(b"x")

    or ``q = skueue.connect_blocking(addr)`` ... ``q.close()``."""
    return BlockingClient(
        address, timeout_s=timeout_s, request_timeout_s=request_timeout_s, admin=admin
    )
