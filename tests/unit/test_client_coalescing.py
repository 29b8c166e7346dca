"""Calls waiting together on one connection go out joined (issue 30, item 4): which
requests may be joined (skueue.client.coalesce), and, against a fake daemon, that a
joined request's results reach the right callers, its error every one of them, and that
nothing is joined across queues, structures, priorities or options; under trio and
asyncio alike."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

import skueue
from skueue.client.coalesce import JoinLimits, join
from skueue.host.replies import Done, ErrorReply
from skueue.host.requests import (
    InsertRequest,
    LeaseRequest,
    PeekRequest,
    RemoveRequest,
    StatsRequest,
)
from skueue.host.results import Inserted, Removed
from skueue.wire.client_codec import encode_reply
from tests.unit.fake_daemon import FakeDaemon

TEST_DEADLINE_S = 10.0


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every client test on both loops: under asyncio the connection is read by
    callbacks (skueue.client.asyncio_stream), under trio by a task."""
    return str(request.param)


WIDE = JoinLimits(ops_per_request_max=1000, frame_bytes_max=1 << 20, remove_count_max=1000)
LIMITS = {"ops_per_request_max": 1000, "value_bytes_max": 1000, "frame_bytes_max": 1 << 20}


def insert(*values: bytes, **options: Any) -> InsertRequest:
    return InsertRequest(0, values, **options)


# -- which requests are joined -------------------------------------------------------------


def test_inserts_of_one_target_join_in_order_and_each_keeps_its_count() -> None:
    requests = [insert(b"a"), insert(b"b", b"c"), insert(b"d")]
    [joined] = join(requests, WIDE)
    assert joined.request == insert(b"a", b"b", b"c", b"d")
    assert (joined.members, joined.counts) == ([0, 1, 2], [1, 2, 1])


def test_plain_removes_of_one_target_join_into_one_remove_of_their_sum() -> None:
    [joined] = join([RemoveRequest(0, 1, "q"), RemoveRequest(0, 3, "q")], WIDE)
    assert joined.request == RemoveRequest(0, 4, "q")
    assert joined.counts == [1, 3]


@pytest.mark.parametrize(
    "other",
    [
        insert(b"x", queue="other"),
        insert(b"x", stack=True),
        insert(b"x", stack=False),
        insert(b"x", priority=3),
        insert(b"x", prefer_stack=True),
    ],
)
def test_inserts_that_differ_in_queue_structure_priority_or_preference_stay_apart(
    other: InsertRequest,
) -> None:
    groups = join([insert(b"a"), other, insert(b"b")], WIDE)
    assert [g.request for g in groups] == [insert(b"a", b"b"), other]
    assert [g.members for g in groups] == [[0, 2], [1]]


@pytest.mark.parametrize(
    "alone",
    [
        RemoveRequest(0, 1, wait_ms=100),  # a blocking wait is one caller's
        RemoveRequest(0, 1, lease_ms=100),  # a lease is a consumer's
        RemoveRequest(0, 1, lease_ms=100, max_deliveries=2),
        RemoveRequest(0, 1, fetch=True),
        RemoveRequest(0, 1, lease_ms=100, look=True),
        PeekRequest(0),
        LeaseRequest(0, "ack", (1,)),
        StatsRequest(0),
    ],
)
def test_blocking_leased_fetching_and_other_kinds_are_never_joined(alone: Any) -> None:
    requests = [RemoveRequest(0, 1), alone, alone, RemoveRequest(0, 1)]
    groups = join(requests, WIDE)
    assert [g.members for g in groups] == [[0, 3], [1], [2]]
    assert groups[1].request is alone and groups[2].request is alone


def test_removes_of_other_queues_or_structures_stay_apart() -> None:
    requests = [RemoveRequest(0, 1), RemoveRequest(0, 1, "q"), RemoveRequest(0, 1, stack=True),
                RemoveRequest(0, 1, prefer_stack=True), RemoveRequest(0, 1)]  # fmt: skip
    assert [g.members for g in join(requests, WIDE)] == [[0, 4], [1], [2], [3]]


def test_joining_stops_at_the_daemons_limits() -> None:
    counted = join([insert(b"a")] * 5, JoinLimits(2, 1 << 20, 1000))
    assert [g.counts for g in counted] == [[1, 1], [1, 1], [1]]
    # Two values of 40 bytes fit a frame of 64 + 2 * 45 bytes, a third does not.
    sized = join([insert(b"x" * 40)] * 3, JoinLimits(1000, 64 + 2 * 45, 1000))
    assert [g.counts for g in sized] == [[1, 1], [1]]
    removes = join([RemoveRequest(0, 2)] * 3, JoinLimits(1000, 1 << 20, 4))
    assert [g.counts for g in removes] == [[2, 2], [2]]


def test_a_lone_request_goes_as_it_is() -> None:
    request = insert(b"a", queue="q", priority=1)
    [joined] = join([request], WIDE)
    assert joined.request is request


# -- against a fake daemon -------------------------------------------------------------------


def queue_of(frame: list[Any]) -> str | None:
    return frame[3].get("queue") if len(frame) > 3 else None


def by_value(frame: list[Any]) -> list[Any]:
    """Inserts answered with a position read from each value (so each caller can tell
    its own result); removes find one element per frame, then empty."""
    kind, rid = frame[0], frame[1]
    if kind == "insert":
        return [encode_reply(Done(rid, tuple(Inserted(i, int(v)) for i, v in enumerate(frame[2]))))]
    got = (Removed(f"e{rid}".encode(), 0, rid),)
    return [encode_reply(Done(rid, got + (Removed(None, 1, None),) * (frame[2] - 1)))]


async def together(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run the calls at once (as concurrent tasks) and return their results in order."""
    out: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        try:
            out[i] = await calls[i]()
        except skueue.SkueueError as e:
            out[i] = e

    async with anyio.create_task_group() as nursery:
        for i in range(len(calls)):
            nursery.start_soon(one, i)
    return out


@pytest.mark.anyio
async def test_concurrent_enqueues_go_in_fewer_frames_and_each_caller_gets_its_own() -> None:
    with FakeDaemon(by_value, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            got = await together([lambda i=i: q.enqueue(b"%d" % i) for i in range(50)])
    assert [r.position for r in got] == list(range(50))
    inserts = [f for f in fake.requests if f[0] == "insert"]
    assert len(inserts) < 50
    assert sorted(int(v) for f in inserts for v in f[2]) == list(range(50))


@pytest.mark.anyio
async def test_concurrent_dequeues_share_one_remove_and_the_rest_are_told_empty() -> None:
    with FakeDaemon(by_value, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            got = await together([q.dequeue for _ in range(30)])
    removes = [f for f in fake.requests if f[0] == "remove"]
    assert len(removes) < 30
    assert sum(f[2] for f in removes) == 30
    # One element per remove frame: each went to exactly one caller, the others got None.
    elements = [g for g in got if g is not None]
    assert sorted(elements) == sorted(f"e{f[1]}".encode() for f in removes)
    assert got.count(None) == 30 - len(removes)


@pytest.mark.anyio
async def test_nothing_is_joined_across_queues_or_priorities() -> None:
    with FakeDaemon(by_value, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            calls = [
                lambda i=i: q.enqueue(b"%d" % i, queue=f"q{i % 3}", priority=i % 2)
                for i in range(60)
            ]
            got = await together(calls)
    assert [r.position for r in got] == list(range(60))
    for frame in fake.requests:
        options = frame[3] if len(frame) > 3 else {}
        targets = {(f"q{int(v) % 3}", int(v) % 2) for v in frame[2]}
        assert targets == {(options.get("queue"), options.get("priority") or 0)}, frame
    assert len(fake.requests) < 60


@pytest.mark.anyio
async def test_a_joined_requests_error_reaches_every_caller_and_no_other() -> None:
    def refuse_bad(frame: list[Any]) -> list[Any]:
        if queue_of(frame) == "bad":
            return [encode_reply(ErrorReply(frame[1], "a stack's name", "refused"))]
        return by_value(frame)

    with FakeDaemon(refuse_bad, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            calls = [
                lambda i=i: q.enqueue(b"%d" % i, queue="bad" if i % 2 else "good")
                for i in range(40)
            ]
            got = await together(calls)
            assert (await q.enqueue(b"7", queue="good")).position == 7  # it serves on
    for i, r in enumerate(got):
        if i % 2:
            assert isinstance(r, skueue.RequestRejected) and "a stack's name" in str(r)
        else:
            assert r.position == i
    assert len([f for f in fake.requests if queue_of(f) == "bad"]) < 20


@pytest.mark.anyio
async def test_a_joined_reply_with_the_wrong_count_fails_its_callers_only() -> None:
    def short(frame: list[Any]) -> list[Any]:
        if len(frame[2]) > 1:  # a joined insert: answered with one result too few
            values = frame[2][:-1]
            return [encode_reply(Done(frame[1], tuple(Inserted(0, int(v)) for v in values)))]
        return by_value(frame)

    with FakeDaemon(short, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            got = await together([lambda i=i: q.enqueue(b"%d" % i) for i in range(10)])
            assert (await q.enqueue(b"3")).position == 3
    assert len(fake.requests) < 11
    assert all(isinstance(r, skueue.NodeUnreachable) for r in got)
    assert "results for" in str(got[0])


@pytest.mark.anyio
async def test_a_caller_that_gives_up_leaves_the_others_of_its_request_their_results() -> None:
    release = threading.Event()

    def held(frame: list[Any]) -> list[Any]:
        release.wait(TEST_DEADLINE_S)
        return by_value(frame)

    with FakeDaemon(held, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            got: dict[int, Any] = {}

            async def enqueue(i: int, scope: anyio.CancelScope | None = None) -> None:
                if scope is None:
                    got[i] = await q.enqueue(b"%d" % i)
                    return
                with scope:
                    got[i] = await q.enqueue(b"%d" % i)

            async with anyio.create_task_group() as nursery:
                quitter = anyio.CancelScope()
                nursery.start_soon(enqueue, 0, quitter)
                for i in range(1, 5):
                    nursery.start_soon(enqueue, i)
                while not fake.requests:
                    await anyio.sleep(0.01)
                quitter.cancel()
                await anyio.sleep(0.05)
                release.set()
    assert len(fake.requests) == 1 and len(fake.requests[0][2]) == 5
    assert 0 not in got
    assert {i: r.position for i, r in got.items()} == {1: 1, 2: 2, 3: 3, 4: 4}


@pytest.mark.anyio
async def test_a_lone_call_goes_alone_and_a_blocking_dequeue_is_never_joined() -> None:
    with FakeDaemon(by_value, limits=LIMITS) as fake, anyio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            assert (await q.enqueue(b"5")).position == 5
            await together([lambda: q.dequeue(wait=1.0) for _ in range(3)])
    assert fake.requests[0][2] == [b"5"]
    removes = [f for f in fake.requests if f[0] == "remove"]
    assert [f[2] for f in removes] == [1, 1, 1]
    assert all(f[3]["wait_ms"] == 1000 for f in removes)
