"""Client sessions against a fake owner, over loopback (issue 8, items 9 and 10).

The harness serves connections the way the daemon does (``greet``, then ``serve`` with
the hello, an error line for bad input) and answers requests from the inbox itself:
a remove gets ``count`` elements of ``VALUE`` (or waits while ``hold`` is set).
"""

from __future__ import annotations

import functools
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from skueue.core.errors import RemoteProtocolError
from skueue.host.replies import Done, StatsReply, Welcome
from skueue.host.requests import RemoveRequest, StatsRequest
from skueue.host.results import Removed
from skueue.runtime.limits import Limits
from skueue.runtime.network.client_reader import ClientInput
from skueue.runtime.network.reactor import Reactor
from skueue.runtime.network.sessions import ClientGone, ClientSessions
from skueue.wire.client_hello import PROTOCOL_VERSION
from skueue.wire.framing import FrameDecoder, pack
from tests.e2e.rawclient import RawClient

pytestmark = pytest.mark.trio

VALUE = b"v" * 1000
# Whether the harness's owner reads plaintext connections itself (the daemon's way where
# epoll exists) or every session keeps its reader task (TLS, elsewhere): both, each test.
OWNER_READS = [True]


@pytest.fixture(autouse=True, params=[True, False], ids=["owner-reads", "task-reads"])
def owner_reads(request: pytest.FixtureRequest) -> None:
    OWNER_READS[0] = request.param


@attrs.define
class Harness:
    sessions: ClientSessions
    port: int
    hold: trio.Event | None = None
    gone: int = 0

    async def client(self, rcvbuf: int | None = None) -> RawClient:
        sock = trio.socket.socket()
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        await sock.connect(("127.0.0.1", self.port))
        return RawClient(trio.SocketStream(sock))


@asynccontextmanager
async def serving(limits: Limits) -> AsyncIterator[Harness]:
    inbox_send, inbox = trio.open_memory_channel[Any](1000)
    reactor = Reactor(owner_reads=OWNER_READS[0])
    sessions = ClientSessions(limits, inbox_send, reactor, lambda: Welcome("p", "queue", 3, {}))

    async def on_connection(stream: trio.SocketStream) -> None:
        decoder = FrameDecoder(limits.frame_bytes_max)
        async with stream:
            try:
                hello, rest = await sessions.greet(stream, decoder)
                await sessions.serve(stream, decoder, rest, hello)
            except RemoteProtocolError as e:
                with trio.move_on_after(1):
                    await stream.send_all(pack(["error", None, str(e)]))
            except (trio.BrokenResourceError, ConnectionError):
                pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, on_connection, 0, host="127.0.0.1")
        )
        harness = Harness(sessions, listeners[0].socket.getsockname()[1])

        async def items() -> AsyncIterator[Any]:
            """What the daemon's owner takes: the inbox, and what it reads itself."""
            while True:
                try:
                    yield inbox.receive_nowait()
                    continue
                except trio.WouldBlock:
                    pass
                if not reactor.items:
                    await reactor.wait(1.0)
                reactor.read_ready()
                for item in reactor.take():
                    yield item
                await trio.lowlevel.checkpoint()

        async def owner() -> None:
            async for item in items():
                if isinstance(item, ClientGone):
                    harness.gone += 1
                    continue
                assert isinstance(item, ClientInput)
                match item.request:
                    case RemoveRequest(rid=rid, count=count):
                        if harness.hold is not None:
                            await harness.hold.wait()
                        results = tuple(Removed(VALUE, i, i) for i in range(count))
                        sessions.deliver(item.client, [Done(rid, results)])
                    case StatsRequest(rid=rid):
                        sessions.deliver(item.client, [StatsReply(rid, {})])
                    case request:
                        sessions.deliver(item.client, [Done(request.rid, ())])

        nursery.start_soon(owner)
        try:
            yield harness
        finally:
            nursery.cancel_scope.cancel()


async def hello(h: Harness, options: dict[str, Any] | None = None) -> RawClient:
    c = await h.client()
    welcome = await c.hello(PROTOCOL_VERSION, options or {})
    assert welcome[0] == "welcome", welcome
    return c


async def test_admin_connections_have_slots_of_their_own_for_admin_requests_only() -> None:
    async with serving(Limits(clients_max=1, admin_clients_max=1)) as h:
        first = await hello(h)
        late = await h.client()
        refused = await late.hello(PROTOCOL_VERSION, {})
        assert refused[:2] == ["error", None] and refused[3] == "unavailable"
        assert "too many clients (limit 1)" in refused[2]
        admin = await hello(h, {"admin": True})
        await admin.send(["stats", 1])
        assert (await admin.receive())[:2] == ["stats", 1]
        await admin.send(["remove", 2, 1])
        error = await admin.receive()
        assert error[:2] == ["error", 2] and error[3] == "invalid" and "admin" in error[2]
        await admin.send(["stats", 3])  # still served
        assert (await admin.receive())[:2] == ["stats", 3]
        second = await h.client()
        refused = await second.hello(PROTOCOL_VERSION, {"admin": True})
        assert refused[0] == "error" and "too many admin clients (limit 1)" in refused[2]
        assert not first.closed


async def test_the_hello_options_are_kept_on_the_session() -> None:
    async with serving(Limits()) as h:
        kept = [await hello(h, {"request_timeout_ms": 1500}), await hello(h, {"admin": True})]
        plain = await h.client()
        assert (await plain.hello(PROTOCOL_VERSION))[0] == "welcome"
        sessions = list(h.sessions.clients.values())
        assert [(s.request_timeout_s, s.admin, s.version) for s in sessions] == [
            (1.5, False, 3),
            (None, True, 3),
            (None, False, 3),
        ]
        assert len(kept) == 2


async def test_an_unsupported_version_is_refused_in_one_line() -> None:
    async with serving(Limits()) as h:
        c = await h.client()
        await c.send(["hello-client", 2])  # version 2's frames are not version 3's
        closing = await c.until_closed()
        assert len(closing) == 1 and closing[0][:2] == ["error", None]
        assert "version 2 is not supported" in closing[0][2]
        assert not h.sessions.clients


async def test_connections_that_have_not_said_hello_are_bounded() -> None:
    """Past the bound the oldest silent connection is closed, so that silent
    connections cannot lock out a newcomer that says hello at once."""
    limits = Limits(hello_pending_max=2, handshake_timeout_s=30)
    async with serving(limits) as h:
        waiting = [await h.client() for _ in range(2)]
        await trio.sleep(0.1)
        assert h.sessions.hello_pending == 2
        third = await h.client()
        closing = await waiting[0].until_closed()
        assert "too many connections waiting to say who they are" in closing[0][2]
        assert "the oldest" in closing[0][2]
        await trio.sleep(0.1)
        assert h.sessions.hello_pending == 2  # the second and the third
        await third.send(["hello-client", PROTOCOL_VERSION])
        with trio.fail_after(3):
            while h.sessions.hello_pending != 1:
                await trio.sleep(0.01)
        await waiting[1].aclose()
        with trio.fail_after(3):
            while h.sessions.hello_pending:
                await trio.sleep(0.01)
        await hello(h)


async def test_one_address_may_hold_only_so_many_connections_that_said_nothing() -> None:
    """Past hello_pending_per_source_max from one address, that address's oldest silent
    connection is closed, though the total limit is far: one address cannot hold the
    daemon's room for strangers, nor lock out its own newcomers."""
    limits = Limits(hello_pending_per_source_max=2, hello_pending_max=100, handshake_timeout_s=30)
    async with serving(limits) as h:
        waiting = [await h.client() for _ in range(2)]
        await trio.sleep(0.1)
        assert h.sessions.hello_pending == 2
        third = await h.client()
        closing = await waiting[0].until_closed()
        assert "2 from 127.0.0.1); this, the oldest, is closed" in closing[0][2]
        await trio.sleep(0.1)
        assert h.sessions.hello_pending == 2  # the second and the third
        for c in (waiting[1], third):
            await c.aclose()
        with trio.fail_after(3):
            while h.sessions.hello_pending:
                await trio.sleep(0.01)
        await hello(h)


async def test_a_large_hello_is_refused_before_it_is_read() -> None:
    async with serving(Limits(hello_bytes_max=100)) as h:
        c = await h.client()
        await c.send(["hello-client", 2, {"padding": "x" * 200}])
        closing = await c.until_closed()
        assert "exceeds the limit of 100 for a hello" in closing[0][2]


async def test_a_hello_and_a_large_request_in_one_write_are_served() -> None:
    """The hello's size limit is for the hello alone."""
    async with serving(Limits(hello_bytes_max=100)) as h:
        c = await h.client()
        await c.stream.send_all(pack(["hello-client", 3]) + pack(["insert", 1, [b"x" * 5000]]))
        assert (await c.receive())[0] == "welcome"
        assert await c.receive() == ["done", 1, []]


async def test_a_client_waiting_for_a_reply_is_not_idle() -> None:
    async with serving(Limits(idle_connection_timeout_s=0.2)) as h:
        c = await hello(h)
        h.hold = trio.Event()
        await c.send(["remove", 1, 1])
        await trio.sleep(0.6)
        h.hold.set()
        assert (await c.receive())[:2] == ["done", 1]
        with trio.fail_after(2):
            closing = await c.until_closed()
        assert "idle" in closing[-1][2] and closing[-1][3] == "timeout"


async def test_a_client_that_does_not_read_is_closed_and_its_elements_counted_dropped() -> None:
    limits = Limits(reply_write_timeout_s=0.3, idle_connection_timeout_s=60)
    async with serving(limits) as h:
        c = await h.client(rcvbuf=4096)
        await c.hello(PROTOCOL_VERSION, {})
        requests = 20
        await c.stream.send_all(b"".join(pack(["remove", i, 50]) for i in range(requests)))
        with trio.fail_after(5):
            while h.gone < 1:
                await trio.sleep(0.01)
        # Nothing was read: at most what fit in the kernels' buffers counts as delivered.
        dropped = h.sessions.dropped_results
        assert 0 < dropped <= requests * 50
        assert (requests * 50 - dropped) * len(VALUE) < 4 * 1024 * 1024


async def test_garbage_behind_the_outstanding_limit_ends_that_client_only() -> None:
    """A client at its limit of outstanding requests whose next frame is garbage: the
    frame is checked when a reply frees a slot (in the owner's flush, where the owner
    reads the connection itself); the client gets the reply and an error line, and the
    owner serves on."""
    async with serving(Limits(requests_per_client_max=1)) as h:
        c = await hello(h)
        h.hold = trio.Event()
        await c.stream.send_all(pack(["remove", 1, 1]) + pack(["no-such-request", 2]))
        await trio.sleep(0.2)  # both read; the second waits for a slot
        h.hold.set()
        h.hold = None
        with trio.fail_after(5):
            closing = await c.until_closed()
        assert closing[0][:2] == ["done", 1]
        assert closing[-1][0] == "error" and closing[-1][3] == "invalid", closing
        other = await hello(h)
        await other.send(["remove", 3, 1])
        assert (await other.receive())[:2] == ["done", 3]
