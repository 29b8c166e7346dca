"""The blocking client is derived from the async one (issue 29 item 4): every public
coroutine of :class:`skueue.client.api.Client` has a blocking twin of the same name, the
same parameters and the same docstring, and the twins work against a real cluster."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

import skueue
from skueue.client.api import Client
from skueue.client.blocking import BlockingClient


def public_coroutines(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }


def missing_twins(async_cls: type, blocking_cls: type) -> list[str]:
    """The public coroutines of ``async_cls`` that ``blocking_cls`` lacks, or whose twin
    takes other parameters."""
    out = []
    for name, coroutine in public_coroutines(async_cls).items():
        twin = getattr(blocking_cls, name, None)
        if twin is None or inspect.iscoroutinefunction(twin):
            out.append(name)
        elif inspect.signature(twin).parameters != inspect.signature(coroutine).parameters:  # type: ignore[arg-type]
            out.append(f"{name} (parameters)")
    return out


def test_every_public_coroutine_has_a_blocking_twin() -> None:
    coroutines = public_coroutines(Client)
    assert {"peek_element", "remove", "push", "pop", "configure_queue", "remove_member",
            "release", "lease_many"} <= set(coroutines)  # fmt: skip
    assert missing_twins(Client, BlockingClient) == []
    for name, coroutine in coroutines.items():
        assert getattr(BlockingClient, name).__doc__ == coroutine.__doc__, name  # type: ignore[attr-defined]


def test_the_check_finds_a_coroutine_without_a_twin() -> None:
    """The check above can fail: a client with one more coroutine has no twin for it."""

    class Grown(Client):
        async def shuffle(self, times: int) -> None:
            """A call the blocking client does not have."""

    assert missing_twins(Grown, BlockingClient) == ["shuffle"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[skueue.LocalCluster]:
    with skueue.local_cluster(processes=1) as c:
        yield c


def test_the_twins_block_until_their_replies(cluster: skueue.LocalCluster) -> None:
    with skueue.connect_blocking(cluster.addresses[0]) as q:
        assert q.push(b"a", queue="undo").ord >= 0
        assert q.pop(queue="undo") == b"a"
        q.enqueue_many([b"x", b"y"], queue="jobs")
        seen = q.peek_element(queue="jobs")
        assert isinstance(seen, skueue.Removed) and seen.value == b"x"
        got = q.remove(5, queue="jobs", until_empty=True)
        assert [r.value for r in got] == [b"x", b"y", None, None, None]  # one request
        assert q.create_queue("limited", max_deliveries=3) is True
        assert q.configure_queue("limited", max_deliveries=5)["max_deliveries"] == 5
        q.enqueue(b"z", queue="limited")
        [leased] = q.dequeue_many(1, queue="limited", lease=30)
        assert q.release([leased], keep=True) == [True]
        assert q.delete_queue("limited") == 1
