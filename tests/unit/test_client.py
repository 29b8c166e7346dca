"""The client against a scriptable fake daemon and a real in-process one (issue 8, items
11, 16, 17 and 18): request timeouts, the wire contract of protocol 2 (hello options,
limits in the welcome, replies in pieces, error codes), client-side limits and splitting,
``dequeue_many`` without padding, and the blocking client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import skueue
import skueue.client.api
from skueue.host.replies import Done, More
from skueue.host.results import Inserted, Removed, Result
from skueue.wire.client_codec import encode_reply
from skueue.wire.client_hello import PROTOCOL_VERSION
from tests.unit.fake_daemon import CLOSE, FakeDaemon

TEST_DEADLINE_S = 10.0
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def cluster() -> Iterator[skueue.LocalCluster]:
    with skueue.local_cluster(processes=1) as c:
        yield c


def done(rid: int, *results: Result) -> list[Any]:
    """A ``done`` frame, as a daemon encodes it."""
    return encode_reply(Done(rid, results))


def echo(frame: list[Any]) -> list[Any]:
    """Answer like a daemon of protocol 3 would: inserts get ranks, removes find empty."""
    kind, rid = frame[0], frame[1]
    if kind == "insert":
        return [done(rid, *(Inserted(i, i) for i in range(len(frame[2]))))]
    if kind == "remove":
        return [done(rid, *(Removed(None, i, None) for i in range(frame[2])))]
    return [["stats", rid, {"processes": 1}]]


# -- item 11: every request has a timeout ------------------------------------------------


@pytest.mark.trio
async def test_a_stalled_daemon_times_out_with_the_default_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without any option a request to a daemon that never answers ends with
    RequestTimeout (the default timeout, shortened here) instead of hanging forever."""
    monkeypatch.setattr(skueue.client.api, "DEFAULT_REQUEST_TIMEOUT_S", 0.3, raising=False)
    monkeypatch.setattr(skueue.client.api, "REPLY_GRACE_S", 0.1, raising=False)
    with FakeDaemon() as fake:
        with trio.fail_after(TEST_DEADLINE_S):
            async with skueue.connect(fake.address) as q:
                with pytest.raises(skueue.SkueueError) as raised:
                    await q.enqueue(b"x")
    assert type(raised.value).__name__ == "RequestTimeout"
    message = str(raised.value)
    assert message == f"no reply from fake ({fake.address}) within 0.3 s; the outcome is unknown"


@pytest.mark.trio
async def test_request_timeout_option_is_used_and_sent_in_the_hello() -> None:
    with FakeDaemon() as fake:
        with trio.fail_after(TEST_DEADLINE_S):
            async with skueue.connect(fake.address, request_timeout_s=0.2) as q:
                t0 = trio.current_time()
                with pytest.raises(skueue.RequestTimeout, match="within 0.2 s"):
                    await q.dequeue_many(3)
                waited = trio.current_time() - t0
    # The client waits the timeout plus a grace for the daemon's own timeout error.
    assert 0.2 <= waited < 0.2 + skueue.client.multiplex.REPLY_GRACE_S + 1.0
    [(kind, version, options)] = fake.hellos
    assert (kind, version, options["request_timeout_ms"]) == ("hello-client", PROTOCOL_VERSION, 200)
    assert len(options["session"]) == 32  # the session its retries are known by


@pytest.mark.trio
async def test_a_late_reply_after_a_timeout_is_ignored_and_the_connection_lives_on() -> None:
    answered: list[int] = []

    def late(frame: list[Any]) -> list[Any]:
        answered.append(frame[1])
        if len(answered) == 1:
            return []  # the first request stalls ...
        # ... and its reply arrives late, just before the second one's.
        return [done(answered[0], Inserted(7, 7)), *echo(frame)]

    with FakeDaemon(late) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address, request_timeout_s=0.2) as q:
            with pytest.raises(skueue.RequestTimeout):
                await q.enqueue(b"a")
            assert await q.enqueue(b"b") == skueue.Inserted(0, 0)


# -- the wire contract of protocol 3 ------------------------------------------------------


@pytest.mark.trio
async def test_admin_flag_is_sent_in_the_hello() -> None:
    with FakeDaemon(echo) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address, request_timeout_s=5, admin=True) as q:
            assert await q.stats() == {"processes": 1}
    assert fake.hellos == [
        ["hello-client", PROTOCOL_VERSION, {"request_timeout_ms": 5000, "admin": True}]
    ]


@pytest.mark.trio
async def test_replies_in_pieces_are_concatenated() -> None:
    def pieces(frame: list[Any]) -> list[Any]:
        rid = frame[1]
        return [
            encode_reply(More(rid, (Removed(b"a", 1, 10), Removed(b"b", 2, 11)))),
            encode_reply(More(rid, (Removed(b"c", 3, 12),))),
            done(rid, Removed(None, 4, None)),
        ]

    with FakeDaemon(pieces, limits={"ops_per_request_max": 100}) as fake:
        with trio.fail_after(TEST_DEADLINE_S):
            async with skueue.connect(fake.address) as q:
                got = await q.remove(4)
    assert got == [
        skueue.Removed(b"a", 1, 10),
        skueue.Removed(b"b", 2, 11),
        skueue.Removed(b"c", 3, 12),
        skueue.Removed(None, 4, None),
    ]


@pytest.mark.parametrize(
    ("code", "error", "text"),
    [
        ("timeout", "RequestTimeout", "member b is down; the outcome is unknown"),
        ("unavailable", "NodeUnavailable", "member b is down (retryable)"),
        ("too-large", "RequestRejected", "member b is down"),
        ("invalid", "RequestRejected", "member b is down"),
        ("something-new", "RequestRejected", "member b is down"),
        (None, "RequestRejected", "member b is down"),
    ],
)
@pytest.mark.trio
async def test_error_codes_map_to_errors_and_keep_the_connection(
    code: str | None, error: str, text: str
) -> None:
    calls: list[int] = []

    def fail_first(frame: list[Any]) -> list[Any]:
        calls.append(frame[1])
        if len(calls) == 1:
            tail = [] if code is None else [code]
            return [["error", frame[1], "member b\nis down", *tail]]
        return echo(frame)

    with FakeDaemon(fail_first) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            with pytest.raises(skueue.SkueueError) as raised:
                await q.enqueue(b"x")
            assert type(raised.value).__name__ == error
            assert str(raised.value).endswith(text)
            assert "\n" not in str(raised.value)
            assert await q.enqueue(b"y") == skueue.Inserted(0, 0)


@pytest.mark.trio
async def test_an_error_answer_followed_by_a_hang_up_is_still_the_answer() -> None:
    """Today's daemon answers a bad request and then closes the connection: the caller
    gets the daemon's reason, not "closed the connection"."""

    def refuse(frame: list[Any]) -> list[Any]:
        return [["error", frame[1], "insert: a value of 101 bytes exceeds the limit of 100"], CLOSE]

    with FakeDaemon(refuse) as fake, trio.fail_after(TEST_DEADLINE_S):
        for _ in range(10):  # which task runs first after the hang-up varies; try often
            async with skueue.connect(fake.address, retry=False) as q:
                with pytest.raises(skueue.RequestRejected, match="exceeds the limit of 100"):
                    await q.enqueue(b"x")
                with pytest.raises(skueue.NodeUnreachable):
                    await q.enqueue(b"y")
            # A client that retries opens a new connection for the next request, which
            # gets an answer of its own.
            async with skueue.connect(fake.address) as q:
                with pytest.raises(skueue.RequestRejected, match="exceeds the limit of 100"):
                    await q.enqueue(b"x")
                with pytest.raises(skueue.RequestRejected, match="exceeds the limit of 100"):
                    await q.enqueue(b"y")


def test_node_unavailable_is_documented_as_retryable() -> None:
    assert issubclass(skueue.NodeUnavailable, skueue.SkueueError)
    assert "retryable" in (skueue.NodeUnavailable.__doc__ or "").lower()


# -- item 16: limits are checked before sending; big calls are split ----------------------


@pytest.mark.trio
async def test_an_oversized_value_is_refused_before_sending() -> None:
    with FakeDaemon(echo, limits={"value_bytes_max": 10}) as fake:
        with trio.fail_after(TEST_DEADLINE_S):
            async with skueue.connect(fake.address) as q:
                with pytest.raises(skueue.RequestRejected, match="11 bytes exceeds the limit"):
                    await q.enqueue_many([b"ok", b"x" * 11])
                assert await q.enqueue(b"x" * 10) == skueue.Inserted(0, 0)
    # Neither of the first call's values went out: all are checked first.
    assert [f[2] for f in fake.requests] == [[b"x" * 10]]


@pytest.mark.trio
async def test_without_limits_in_the_welcome_the_default_limit_holds() -> None:
    with FakeDaemon(echo) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            with pytest.raises(skueue.RequestRejected, match="limit of 1048576 bytes"):
                await q.enqueue(b"x" * (MIB + 1))
    assert fake.requests == []


@pytest.mark.trio
async def test_one_oversized_value_does_not_break_concurrent_requests(
    cluster: skueue.LocalCluster,
) -> None:
    """Against a real daemon: the oversized value fails alone; the other requests on the
    same connection, in flight at the same time, succeed, and the client stays usable."""
    outcomes: dict[str, object] = {}
    with trio.fail_after(30):
        async with skueue.connect(cluster.addresses[0]) as q:

            async def put(name: str, value: bytes) -> None:
                try:
                    outcomes[name] = await q.enqueue(value)
                except skueue.SkueueError as e:
                    outcomes[name] = e

            async with trio.open_nursery() as nursery:
                for i in range(5):
                    nursery.start_soon(put, f"small{i}", b"s%d" % i)
                nursery.start_soon(put, "big", b"x" * (MIB + 1))
                for i in range(5, 10):
                    nursery.start_soon(put, f"small{i}", b"s%d" % i)
            got = await q.dequeue_many(20)
    assert isinstance(outcomes.pop("big"), skueue.RequestRejected)
    assert all(isinstance(v, skueue.Inserted) for v in outcomes.values()), outcomes
    assert sorted(got) == sorted(b"s%d" % i for i in range(10))


@pytest.mark.trio
async def test_large_calls_are_split_within_the_count_and_frame_limits() -> None:
    limits = {"ops_per_request_max": 3, "frame_bytes_max": 1000, "value_bytes_max": 300}
    with FakeDaemon(echo, limits=limits) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            values = [b"%d" % i for i in range(7)] + [b"v" * 300] * 5
            assert len(await q.enqueue_many(values)) == len(values)
            assert len(await q.remove(8)) == 8
    inserts = [f[2] for f in fake.requests if f[0] == "insert"]
    assert [v for chunk in inserts for v in chunk] == values  # all of them, in order
    assert all(len(chunk) <= 3 for chunk in inserts)
    assert all(sum(len(v) for v in chunk) <= 1000 - 64 for chunk in inserts)
    assert [f[2] for f in fake.requests if f[0] == "remove"] == [3, 3, 2]


@pytest.mark.trio
async def test_an_old_daemon_gets_removes_whose_reply_fits_one_frame() -> None:
    """A daemon that sends no limits does not split its replies, so a remove may ask only
    for as many elements as fit one reply frame at the default limits (16 MiB / 1 MiB)."""
    with FakeDaemon(echo) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            assert len(await q.remove(40)) == 40
    counts = [f[2] for f in fake.requests]
    assert sum(counts) == 40 and max(counts) * MIB < 16 * MIB


# -- item 17: dequeue_many returns the elements only -------------------------------------


@pytest.mark.trio
async def test_dequeue_many_returns_only_the_elements(cluster: skueue.LocalCluster) -> None:
    with trio.fail_after(30):
        async with skueue.connect(cluster.addresses[0]) as q:
            await q.remove(1000)  # whatever other tests left behind
            await q.enqueue_many([b"a", b"", b"c"])
            assert await q.dequeue_many(10) == [b"a", b"", b"c"]  # b"" is an element
            assert await q.dequeue_many(5) == []
            await q.enqueue(b"d")
            removed = await q.remove(3)
    assert [r.value for r in removed] == [b"d", None, None]  # remove keeps the empties


@pytest.mark.trio
async def test_dequeue_many_stops_asking_once_the_queue_ran_dry() -> None:
    limits = {"ops_per_request_max": 2}
    with FakeDaemon(echo, limits=limits) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            assert await q.dequeue_many(10) == []
    assert [f[2] for f in fake.requests] == [2]


# -- item 18: the blocking client ---------------------------------------------------------


def test_blocking_client_works_without_with_and_has_insert(cluster: skueue.LocalCluster) -> None:
    q = skueue.connect_blocking(cluster.addresses[0])
    try:
        q.remove(1000)  # whatever other tests left behind
        got = q.insert([b"i1", b"i2"])
        assert [type(g) for g in got] == [skueue.Inserted, skueue.Inserted]
        removed = q.remove(3)
        assert [r.value for r in removed] == [b"i1", b"i2", None]
    finally:
        q.close()
    q.close()  # a second close does nothing
    with skueue.connect_blocking(cluster.addresses[0], request_timeout_s=5) as q2:
        q2.enqueue(b"w")
        assert q2.dequeue_many(2) == [b"w"]


def test_blocking_client_times_out_too() -> None:
    with (
        FakeDaemon() as fake,
        skueue.connect_blocking(fake.address, request_timeout_s=0.2) as q,
        pytest.raises(skueue.RequestTimeout),
    ):
        q.enqueue(b"x")


def test_a_script_that_never_closes_its_blocking_client_still_exits() -> None:
    script = (
        "import sys, skueue\n"
        "q = skueue.connect_blocking(sys.argv[1])\n"
        "q.enqueue(b'x')\n"
        "print('done', flush=True)\n"
    )
    root = Path(__file__).resolve().parents[2]
    with FakeDaemon(echo) as fake:
        out = subprocess.run(
            [sys.executable, "-c", script, fake.address],
            capture_output=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            timeout=30,
            check=False,
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"done"]


# -- issue 11, item 5: a broken connection is reopened and waiting requests sent again ---


@pytest.mark.trio
async def test_a_request_cut_off_by_a_hang_up_is_sent_again_on_a_new_connection() -> None:
    """The first attempt's connection closes without an answer; the client reopens it
    under the same session and sends the same request (same rid) again."""
    answered: list[int] = []

    def hang_up_once(frame: list[Any]) -> list[Any]:
        if not answered:
            answered.append(frame[1])
            return [CLOSE]
        return echo(frame)

    with FakeDaemon(hang_up_once) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address) as q:
            got = await q.enqueue(b"job")
    assert got.ord == 0
    first, again = fake.requests
    assert first == again and first[0] == "insert"  # the same request, same rid
    sessions = {hello[2]["session"] for hello in fake.hellos}
    assert len(fake.hellos) == 2 and len(sessions) == 1  # one session over two connections


@pytest.mark.trio
async def test_a_client_that_cannot_reconnect_times_out_saying_why() -> None:
    with FakeDaemon(lambda frame: [CLOSE]) as fake, trio.fail_after(TEST_DEADLINE_S):
        async with skueue.connect(fake.address, request_timeout_s=0.3) as q:
            fake.stop()  # the hang-up below is final: nothing listens any more
            with pytest.raises(skueue.RequestTimeout, match="reopening it failed: cannot reach"):
                await q.enqueue(b"job")
