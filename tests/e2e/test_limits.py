"""Client connections against a real daemon with small limits (issue 8, items 8, 10, 16).

Each test runs one in-process daemon with limits small enough to hit in well under a
second, and talks to it frame by frame over loopback (:mod:`tests.e2e.rawclient`).
"""

from __future__ import annotations

import struct

import pytest
import trio

from skueue.runtime.limits import Limits
from skueue.wire.framing import pack
from tests.e2e.rawclient import RawClient, inproc_daemon, records

pytestmark = pytest.mark.trio


def header(length: int) -> bytes:
    return struct.pack(">I", length)


async def test_idle_clients_are_closed_so_they_cannot_lock_out_real_ones() -> None:
    """Clients that said hello and then nothing hold every slot only until their idle
    deadline; a client that comes later is served."""
    limits = Limits(clients_max=4, idle_connection_timeout_s=0.3)
    async with inproc_daemon(limits) as daemon:
        idle = [await RawClient.connect(daemon) for _ in range(4)]
        for c in idle:
            assert (await c.hello())[0] == "welcome"
        late = await RawClient.connect(daemon)
        refused = await late.hello()
        assert refused[0] == "error" and "too many clients" in refused[2]
        with trio.fail_after(3):
            for c in idle:
                closing = await c.until_closed()
                assert closing and closing[-1][0] == "error" and "idle" in closing[-1][2]
        again = await RawClient.connect(daemon)
        assert (await again.hello())[0] == "welcome"
        await again.send(["stats", 1])
        assert (await again.receive())[:2] == ["stats", 1]


async def test_a_busy_client_is_not_idle() -> None:
    """Requests keep a connection alive: a client that keeps asking past the idle
    deadline is served throughout."""
    limits = Limits(idle_connection_timeout_s=0.3)
    async with inproc_daemon(limits) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        for rid in range(1, 8):
            await trio.sleep(0.1)
            await c.send(["remove", rid, 1])
            assert (await c.receive())[:2] == ["done", rid]


async def test_a_frame_stalled_midway_is_closed_at_the_read_deadline() -> None:
    limits = Limits(frame_read_timeout_s=0.3, idle_connection_timeout_s=60)
    async with inproc_daemon(limits) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        await c.stream.send_all(header(1000) + b"\x93" + b"x" * 10)
        with trio.fail_after(3):
            closing = await c.until_closed()
        assert closing and closing[-1][0] == "error" and "in time" in closing[-1][2], closing


async def test_partial_frames_share_one_budget_across_connections() -> None:
    """Connections stalled inside large frames hold at most the total budget: the one
    that would go over it is closed; the others still finish their frames."""
    limits = Limits(
        frame_bytes_max=64_000,
        value_bytes_max=60_000,
        partial_frame_bytes_total_max=100_000,
        frame_read_timeout_s=30,
    )
    async with inproc_daemon(limits) as daemon:
        blob = pack(["insert", 1, [b"v" * 59_000]])
        clients = [await RawClient.connect(daemon) for _ in range(3)]
        for c in clients:
            await c.hello()
        for c in clients[:2]:
            await c.stream.send_all(blob[:40_000])
        await trio.sleep(0.1)
        await clients[2].stream.send_all(blob[:40_000])
        with trio.fail_after(3):
            closing = await clients[2].until_closed()
        assert closing and "partial frames" in closing[-1][2], closing
        for c in clients[:2]:
            await c.stream.send_all(blob[40_000:])
            assert (await c.receive())[:2] == ["done", 1]
        assert daemon.sessions.buffers.used == 0


async def test_an_oversized_value_or_count_fails_alone_and_the_connection_stays() -> None:
    limits = Limits(value_bytes_max=100, ops_per_request_max=5)
    async with inproc_daemon(limits) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        await c.send(["insert", 1, [b"x" * 101]])
        await c.send(["remove", 2, 6])
        await c.send(["insert", 3, [b"y"] * 6])
        await c.send(["insert", 4, [b"ok"]])
        got = {}
        for _ in range(4):
            frame = await c.receive()
            got[frame[1]] = frame
        for rid in (1, 2, 3):
            assert got[rid][0] == "error" and got[rid][3] == "too-large", got[rid]
            assert "exceed" in got[rid][2]
        assert got[4][0] == "done"
        await c.send(["remove", 5, 1])
        assert await c.receive() == ["done", 5, ["removed", [b"ok", 1, records(got[4])[0][1]]]]


async def test_a_bad_field_is_invalid_and_closes_the_connection() -> None:
    async with inproc_daemon(Limits()) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        await c.send(["remove", 1, "three"])
        closing = await c.until_closed()
        assert closing[-1][:2] == ["error", 1] and closing[-1][3] == "invalid", closing


async def test_an_oversized_frame_is_skipped_unbuffered_and_answered_by_its_rid() -> None:
    limits = Limits(frame_bytes_max=1000, value_bytes_max=500)
    async with inproc_daemon(limits) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        await c.send(["insert", 7, [b"z" * 5000]])
        error = await c.receive()
        assert error[:2] == ["error", 7] and error[3] == "too-large", error
        assert "exceeds the limit of 1000" in error[2]
        assert daemon.sessions.buffers.used == 0
        await c.send(["insert", 8, [b"fits"]])
        assert (await c.receive())[:2] == ["done", 8]


async def test_an_oversized_frame_without_a_rid_ends_the_connection_with_one_line() -> None:
    limits = Limits(frame_bytes_max=1000)
    async with inproc_daemon(limits) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        await c.stream.send_all(header(5000) + b"\xc1" * 5000)
        closing = await c.until_closed()
        assert len(closing) == 1 and closing[0][:2] == ["error", None], closing
        assert closing[0][3] == "too-large" and "5000 bytes" in closing[0][2]


async def test_a_large_remove_reply_is_split_into_frames_within_the_limit() -> None:
    """``dequeue -n 20`` of values near the frame limit: every frame fits, every value
    arrives, in order (issue 8, item 8)."""
    limits = Limits(frame_bytes_max=4096, value_bytes_max=1000)
    async with inproc_daemon(limits) as daemon:
        c = await RawClient.connect(daemon)
        await c.hello()
        values = [bytes([i]) * 1000 for i in range(20)]
        for i in range(0, 20, 2):
            await c.send(["insert", 100 + i, values[i : i + 2]])
            assert (await c.receive())[0] == "done"
        await c.send(["remove", 1, 20])
        got, kinds = [], []
        while True:
            frame = await c.receive()
            assert frame[1] == 1, frame
            kinds.append(frame[0])
            got.extend(r[0] for r in records(frame))
            if frame[0] == "done":
                break
        assert kinds[-1] == "done" and set(kinds[:-1]) == {"more"} and len(kinds) >= 5
        assert got == values
        assert max(c.sizes) <= limits.frame_bytes_max
