"""The client's connection under asyncio (skueue.client.asyncio_stream): read by
callbacks, written with one transport write; the same behaviour as anyio's streams give
under trio (tests/unit/test_client.py) where it matters: replies in pieces, writes larger
than the transport's buffer, a hang-up (the request sent again), a bad reply, a stalled
daemon."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import skueue
from skueue.client.asyncio_stream import ProtocolStream
from skueue.host.replies import Done, More
from skueue.host.results import Inserted, Removed
from skueue.wire.client_codec import encode_reply
from tests.unit.fake_daemon import CLOSE, FakeDaemon

TEST_DEADLINE_S = 10.0
MIB = 1 << 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def echo(frame: list[Any]) -> list[Any]:
    kind, rid = frame[0], frame[1]
    if kind == "insert":
        return [encode_reply(Done(rid, tuple(Inserted(i, i) for i in range(len(frame[2])))))]
    return [encode_reply(Done(rid, tuple(Removed(None, i, None) for i in range(frame[2]))))]


@pytest.mark.anyio
async def test_under_asyncio_the_connection_is_read_by_callbacks() -> None:
    with FakeDaemon(echo) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            assert isinstance(q._link.stream, ProtocolStream)
            assert await q.enqueue(b"x") == skueue.Inserted(0, 0)
            assert await q.dequeue() is None


@pytest.mark.anyio
async def test_replies_in_pieces_and_writes_past_the_transport_buffer() -> None:
    def pieces(frame: list[Any]) -> list[Any]:
        rid = frame[1]
        if frame[0] == "insert":
            return echo(frame)
        return [
            encode_reply(More(rid, (Removed(b"a" * MIB, 1, 10),))),
            encode_reply(More(rid, (Removed(b"b", 2, 11),))),
            encode_reply(Done(rid, (Removed(None, 3, None),))),
        ]

    limits = {"ops_per_request_max": 100, "value_bytes_max": 2 * MIB, "frame_bytes_max": 16 * MIB}
    with FakeDaemon(pieces, limits=limits) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            # 8 MiB in one frame: far over the transport's buffer, so the write waits.
            got = await q.enqueue_many([bytes([i]) * MIB for i in range(8)])
            assert len(got) == 8
            removed = await q.remove(3)
    assert [r.value for r in removed] == [b"a" * MIB, b"b", None]
    assert sum(len(v) for v in fake.requests[0][2]) == 8 * MIB


@pytest.mark.anyio
async def test_a_request_cut_off_by_a_hang_up_is_sent_again() -> None:
    answered: list[int] = []

    def hang_up_once(frame: list[Any]) -> list[Any]:
        if not answered:
            answered.append(frame[1])
            return [CLOSE]
        return echo(frame)

    with FakeDaemon(hang_up_once) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            assert (await q.enqueue(b"job")).ord == 0
    first, again = fake.requests
    assert first == again  # the same request, same rid, on the second connection
    assert len(fake.hellos) == 2


@pytest.mark.anyio
async def test_a_bad_reply_ends_the_connection_saying_so() -> None:
    with FakeDaemon(lambda frame: [["done", 10**9, []]]) as fake:
        with anyio.fail_after(TEST_DEADLINE_S):
            async with skueue.connect(fake.address, retry=False) as q:
                with pytest.raises(skueue.NodeUnreachable, match="bad reply .*unknown request"):
                    await q.enqueue(b"x")
                with pytest.raises(skueue.NodeUnreachable):
                    await q.enqueue(b"y")


@pytest.mark.anyio
async def test_after_a_bad_reply_a_client_with_a_session_reconnects() -> None:
    calls: list[int] = []

    def bad_once(frame: list[Any]) -> list[Any]:
        calls.append(frame[1])
        return [["done", 10**9, []]] if len(calls) == 1 else echo(frame)

    with FakeDaemon(bad_once) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            assert await q.enqueue(b"x") == skueue.Inserted(0, 0)
    assert len(fake.hellos) == 2 and calls[0] == calls[1]


@pytest.mark.anyio
async def test_a_stalled_daemon_times_out() -> None:
    with FakeDaemon() as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address, request_timeout_s=0.2) as q:
            with pytest.raises(skueue.RequestTimeout, match="within 0.2 s"):
                await q.enqueue(b"x")
