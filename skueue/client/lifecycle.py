"""A client's connection over its life: opened on the first member of the seed list that
answers, read by one task, reopened after a break (with the waiting enqueues and
dequeues sent again), moved to another member when this one cannot be reopened, and
closed with every request still waiting failed at once.

:class:`Link` is that connection; the requests on it are :mod:`skueue.client.multiplex`'s;
the API over it is :mod:`skueue.client.api`'s.
"""

from __future__ import annotations

import os
import secrets
import ssl
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import attrs

from skueue.client.asyncio_stream import ProtocolStream
from skueue.client.connection import Opened, open_connection
from skueue.client.deadlines import Deadlines, Timed
from skueue.client.errors import (
    BadAddress,
    NodeUnavailable,
    NodeUnreachable,
    ProcessMoved,
    SkueueError,
    reason,
)
from skueue.client.multiplex import Call, Requests
from skueue.core.errors import RemoteProtocolError
from skueue.host.address import AddressError, parse_seed_list
from skueue.host.replies import Welcome
from skueue.runtime.limits import Limits
from skueue.wire.client_hello import PROTOCOL_VERSION, ClientHello

DEFAULT_NODE = "127.0.0.1:7400"
CONNECT_TIMEOUT_S = 10.0
# Waits between attempts to reopen a broken connection (doubling up to the maximum).
RECONNECT_START_S = 0.05
RECONNECT_MAX_S = 1.0

Reopen = Callable[[], Awaitable[Opened]]
FailOver = Callable[[str], Awaitable[tuple[str, Opened] | None]]


class Link:
    """The connection to one daemon, and the requests waiting on it."""

    def __init__(
        self,
        opened: Opened,
        address: str,
        request_timeout_s: float,
        reopen: Reopen | None = None,
        fail_over: FailOver | None = None,
    ) -> None:
        # The current connection; None while a broken one is being reopened.
        self.stream: anyio.abc.ByteStream | None = opened.stream
        self.opened = opened  # the first connection, until keep_connected() reads it
        self.connection = 1  # counts the connections
        self._reopen = reopen  # None: a broken connection ends the client
        self.retries = reopen is not None
        # Opens a session on another member of the seed list (None: no other seed).
        self._fail_over = fail_over
        self._read_scope = anyio.CancelScope()  # the current connection's reader
        self._why_lost = ""  # why the connection broke last
        self._reconnect_error = ""  # why the last attempt to reopen it failed
        self.process_id = opened.welcome.process_id
        self.structure = opened.welcome.structure
        self.address = address
        self.request_timeout_s = request_timeout_s
        self.requests = Requests()
        self._wake = anyio.Event()  # set: calls wait in the outbox for the writer
        self._deadlines = Deadlines(self._expire)
        self.broken: SkueueError | None = None

    @property
    def name(self) -> str:
        """The daemon as error messages name it: its id, and its address if different."""
        if self.address == self.process_id:
            return self.process_id
        return f"{self.process_id} ({self.address})"

    def why_unanswered(self) -> str:
        """Why a request got no reply, when the connection is down: `` (reason)``."""
        if self.stream is not None:
            return ""
        tried = self._reconnect_error and f"; reopening it failed: {self._reconnect_error}"
        return f" ({self._why_lost}{tried})"

    def submit(self, call: Call, seconds: float, waits: bool) -> None:
        """Queue a call for the writer; it goes out with whatever else is waiting when
        the writer runs next (no timer: a lone call goes at once).  It ends with a
        timeout ``seconds`` from now unless answered before (``waits``: a blocking
        remove's, see :class:`Deadlines`)."""
        self.requests.outbox.append(call)
        self._deadlines.add(call, seconds, waits)
        self._wake.set()

    def _expire(self, call: Timed) -> None:
        """A call's deadline passed: its caller gets a RequestTimeout."""
        assert isinstance(call, Call)
        self.requests.leave(call)
        call.done.set()

    async def _write_requests(self) -> None:
        """The connection's writer, the only task that writes to it: each time calls
        are waiting, all of them go out as request frames (joined where they can be) in
        one write, after what a reconnect left to send again."""
        requests = self.requests
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            requests.take()
            stream, connection = self.stream, self.connection
            if stream is None:
                continue  # the reconnect sends every waiting request again
            # Not those failed or given up on since they were taken.
            waiters = [w for w in requests.unsent if w.rid in requests.waiting]
            requests.unsent = []
            if not waiters:
                continue
            sending = True
            try:
                await stream.send(b"".join(w.blob for w in waiters))
                sending = False
                for waiter in waiters:
                    waiter.sent_on = connection
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as e:
                sending = False
                self.lose(connection, f"connection to {self.name} broke: {reason(e)}")
            finally:
                if sending:
                    # Cut off in the middle of a frame: this connection is out of step.
                    self.lose(connection, f"a send to {self.name} was cut off")

    def lose(self, connection: int, why: str) -> None:
        """Connection number ``connection`` is unusable: end the client, or (with a
        session) let :meth:`keep_connected` open another."""
        if connection != self.connection or self.stream is None:
            return  # that one is gone already
        self._why_lost, self._reconnect_error = why, ""
        if self._reopen is None:
            self.close(NodeUnreachable(why))
        else:
            self.requests.fail(NodeUnreachable(why), retries_too=False)
        self._read_scope.cancel()

    def close(self, error: SkueueError) -> None:
        """The client is over: every call fails with ``error`` from now on."""
        if self.broken is None:
            self.broken = error
        self.requests.fail(self.broken, retries_too=True)

    async def keep_connected(self) -> None:
        """Write requests and read replies; when the connection breaks, open another
        (with a session) and send the waiting enqueues and dequeues again."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._write_requests)
            tasks.start_soon(self._deadlines.keep)
            await self._read_all_connections()
            tasks.cancel_scope.cancel()

    async def _read_all_connections(self) -> None:
        opened = self.opened
        while True:
            stream = opened.stream
            await self._read_replies(opened)
            self.stream = None
            await anyio.aclose_forcefully(stream)
            if self._reopen is None or self.broken is not None:
                return
            reopened = await self._reconnect()
            if reopened is None:
                return
            opened = reopened

    async def _reconnect(self) -> Opened | None:
        """A new connection, every waiting retryable request to be sent again on it
        (None: the address now answers as another daemon, and the client is broken)."""
        assert self._reopen is not None
        delay = RECONNECT_START_S
        while True:
            try:
                opened = await self._reopen()
            except SkueueError as e:
                self._reconnect_error = str(e)
                moved = await self._move_to_another_member()
                if moved is None:
                    await anyio.sleep(delay)
                    delay = min(RECONNECT_MAX_S, delay * 2)
                    continue
                opened = moved
            if opened.welcome.process_id != self.process_id:
                await anyio.aclose_forcefully(opened.stream)
                self.close(NodeUnreachable(
                    f"{self.address} is now {opened.welcome.process_id}, not {self.process_id}"
                ))  # fmt: skip
                return None
            # The writer sends every waiting request again, oldest first, before any
            # new one.
            self.connection += 1
            self.requests.unsent = self.requests.to_send_again()
            self.stream = opened.stream
            self._wake.set()
            return opened

    async def _move_to_another_member(self) -> Opened | None:
        """With a seed list, when this daemon cannot be reopened: go on with another
        member, but only while no request waits that went out to this one (its outcome
        is this daemon's to tell: sent elsewhere, an enqueue could be applied twice).
        Such requests time out first, as unknown; the next ones go to the new member."""
        if self._fail_over is None or self.requests.sent_any():
            return None
        moved = await self._fail_over(self.address)
        if moved is None:
            return None
        target, opened = moved
        self.address, self.process_id = target, opened.welcome.process_id
        self.structure = opened.welcome.structure
        return opened

    async def _read_replies(self, opened: Opened) -> None:
        """Deliver the replies of one connection until it ends (or another task found it
        broken)."""
        connection = self.connection
        why = f"{self.name} closed the connection"
        with anyio.CancelScope() as self._read_scope:  # lose() cancels it
            try:
                for frame in opened.leftover:
                    self._deliver(frame, connection)
                if isinstance(opened.stream, ProtocolStream):
                    why = await self._take_deliveries(opened, connection) or why
                else:
                    while True:
                        data = await opened.stream.receive()
                        for frame in opened.decoder.feed(data):
                            self._deliver(frame, connection)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            except OSError as e:
                why = f"connection to {self.name} broke: {reason(e)}"
            except RemoteProtocolError as e:
                why = f"bad reply from {self.name}: {e}"
        self.lose(connection, why)

    async def _take_deliveries(self, opened: Opened, connection: int) -> str | None:
        """Under asyncio: the stream hands each chunk to the link as it arrives (no task
        woken per chunk); wait until it ends.  Returns why it ended, if a bad reply
        ended it."""
        stream = opened.stream
        assert isinstance(stream, ProtocolStream)
        bad: list[str] = []

        def deliver(data: bytes) -> None:
            if bad:
                return  # out of step since a bad reply: the connection is ending
            try:
                for frame in opened.decoder.feed(data):
                    self._deliver(frame, connection)
            except RemoteProtocolError as e:
                bad.append(f"bad reply from {self.name}: {e}")
                stream.abort()

        stream.deliver_to(deliver)
        await stream.wait_closed()
        return bad[0] if bad else None

    def _deliver(self, frame: object, connection: int) -> None:
        ending = self.requests.deliver(frame, connection, self.name)
        if ending is not None:
            self.close(ending)


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


def resolve_address(address: str | None) -> str:
    """The address to use: ``address``, else ``$SKUEUE_NODE``, else the default."""
    return address or os.environ.get("SKUEUE_NODE") or DEFAULT_NODE


def seed_list(addresses: str) -> list[str]:
    """``"HOST:PORT,HOST:PORT,..."``: the members a client may use, in order; a bad one
    is :class:`BadAddress` before anything is dialled."""
    try:
        return [str(a) for a in parse_seed_list(addresses)]
    except AddressError as e:
        raise BadAddress(str(e)) from None


async def open_first(
    seeds: list[str], hello: ClientHello, timeout_s: float, tls: ssl.SSLContext | None = None
) -> tuple[str, Opened]:
    """The first seed that answers, in order; if none does, the error of each, in one line."""
    errors = []
    for seed in seeds:
        try:
            return seed, await open_connection(seed, hello, timeout_s, tls)
        except BadAddress:
            raise
        except SkueueError as e:
            if len(seeds) == 1:
                raise
            errors.append(str(e))
    raise NodeUnreachable("no member of the seed list answered: " + "; ".join(errors))


async def open_link(
    seeds: list[str],
    *,
    timeout_s: float,
    request_timeout_s: float,
    admin: bool,
    retry: bool,
    token: str | None,
    tls: ssl.SSLContext | None,
) -> Link:
    """The first seed that answers, as a :class:`Link`.  With ``retry`` the client has
    a session (its requests are unique by it), and a broken connection is reopened, to
    the same daemon or, if it cannot be, to another member of ``seeds``."""

    def new_hello() -> ClientHello:
        session = secrets.token_hex(16) if retry else None  # a session is one daemon's
        return ClientHello(PROTOCOL_VERSION, request_timeout_s, admin, session, token)

    hello = new_hello()
    target, opened = await open_first(seeds, hello, timeout_s, tls)
    # Its session belongs to this process: the hellos that reopen it say so, and a
    # member that does not serve it answers where it is served now (failover).
    hello = attrs.evolve(hello, process=opened.welcome.process_id)

    def others(current: str) -> list[str]:
        at = seeds.index(current) if current in seeds else len(seeds)
        return [*seeds[at + 1 :], *seeds[:at]]

    async def reopen() -> Opened:
        """The session's process again: where it was, or, after a failover, where a
        member of the seed list says it is served now (the waiting requests go there
        with their keys: its retry window answers those that took effect)."""
        try:
            return await open_connection(link.address, hello, timeout_s, tls)
        except ProcessMoved as e:
            where = e.address
        except (NodeUnreachable, NodeUnavailable):
            found = await ask_where(others(link.address))
            if found is None:
                raise
            where = found
        opened = await open_connection(where, hello, timeout_s, tls)
        link.address = where
        return opened

    async def ask_where(members: list[str]) -> str | None:
        for member in members:
            try:
                opened = await open_connection(member, hello, timeout_s, tls)
            except ProcessMoved as e:
                return e.address
            except SkueueError:
                continue
            await anyio.aclose_forcefully(opened.stream)  # it serves the process itself
            return member
        return None

    async def fail_over(current: str) -> tuple[str, Opened] | None:
        nonlocal hello
        fresh = new_hello()
        for other in others(current):
            try:
                moved = await open_connection(other, fresh, timeout_s, tls)
            except SkueueError:
                continue
            hello = attrs.evolve(fresh, process=moved.welcome.process_id)
            return other, moved
        return None

    link = Link(
        opened,
        target,
        request_timeout_s,
        reopen=reopen if retry else None,
        fail_over=fail_over if retry and len(seeds) > 1 else None,
    )
    return link
