"""Join and Leave with real daemons while clients keep working (issue: dynamic membership).

Two daemons start as a static cluster; a producer enqueues 1,000 elements; two more
daemons join (``skueued --join``) and one of the first two leaves (``skueue leave``):
once the process holding the anchor, once another.  Two clients enqueue and dequeue
the whole time.  Then a drain empties the queue: every element came out exactly once,
the history is linearizable, and the producer's elements came out in its order.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

import skueue
from skueue.check.checker import check
from skueue.check.history import Record
from tests.e2e.daemons import Cluster, Daemon, spawn, stop, wait_ready

PRODUCED = 1000
CLIENT_OPS = 150
DEADLINE_S = 90.0


async def anchor_holder(addresses: list[str]) -> str:
    """The daemon whose stats say it holds the anchor's counters (None while they move)."""
    for _ in range(200):
        for address in addresses:
            async with skueue.connect(address) as q:
                stats = await q.stats()
            for member in stats["members"]:
                if member.get("anchor") and member["process"] == address:
                    return address
        await trio.sleep(0.05)
    raise AssertionError("no daemon reports the anchor")


class History:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.start = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.start

    async def enqueue(self, q: skueue.Client, who: str, seq: int, value: str) -> None:
        t = self.now()
        got = (await q.insert([value.encode()]))[0]
        self.records.append(
            Record(who, seq, "enqueue", value, t, self.now(), got.position, got.ord)
        )

    async def dequeue(self, q: skueue.Client, who: str, seq: int, count: int = 1) -> int:
        t = self.now()
        got = await q.remove(count)
        done = self.now()
        for i, r in enumerate(got):
            value = None if r.value is None else r.value.decode()
            self.records.append(Record(who, seq + i, "dequeue", value, t, done, r.position, r.ord))
        return sum(1 for r in got if r.value is not None)


@pytest.mark.parametrize("leaver", ["anchor", "other"])
def test_join_and_leave_under_load(
    leaver: str, skueued_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    first = skueued_cluster(2)
    joiners: list[Daemon] = []
    history = History()

    async def client(address: str, name: str) -> None:
        async with skueue.connect(address) as q:
            for seq in range(CLIENT_OPS):
                if seq % 2 == 0:
                    await history.enqueue(q, name, seq, f"{name}-{seq}")
                else:
                    await history.dequeue(q, name, seq)

    async def membership(a: str, b: str) -> str:
        # Two daemons join, through different seeds, while the clients run.
        for i, seed in enumerate((a, b)):
            joiners.append(spawn(["--listen", "127.0.0.1:0", "--join", seed], tmp_path, f"j{i}"))
        await trio.to_thread.run_sync(wait_ready, joiners)
        everyone = [*first.addresses, *(j.address for j in joiners)]
        going = await anchor_holder(everyone) if leaver == "anchor" else b
        async with skueue.connect(going) as q:
            await q.leave()  # returns once the others hold its data
        return going

    async def main() -> tuple[str, str]:
        holder = await anchor_holder(first.addresses)
        other = next(a for a in first.addresses if a != holder)
        # The clients use a daemon that stays: the anchor case takes the holder away.
        stay, maybe_going = (other, holder) if leaver == "anchor" else (holder, other)
        with trio.fail_after(DEADLINE_S):
            async with skueue.connect(stay) as q:
                for seq in range(PRODUCED):
                    await history.enqueue(q, "producer", seq, f"p-{seq:04d}")
            went = ""

            async def change() -> None:
                nonlocal went
                went = await membership(stay, maybe_going)

            async with trio.open_nursery() as n:
                n.start_soon(client, stay, "c0")
                n.start_soon(client, stay, "c1")
                n.start_soon(change)
            async with skueue.connect(stay) as q:
                seq = 0
                while True:
                    got = await history.dequeue(q, "drain", seq, 200)
                    seq += 200
                    if got < 200:
                        break
        return went, stay

    try:
        went, stay = trio.run(main)
    finally:
        problems = stop([j for j in joiners if j.alive()])
        assert not problems, problems
    gone = next(d for d in [*first.daemons, *joiners] if d.address == went)
    gone.proc.wait(timeout=10)
    assert gone.proc.returncode == 0, gone.stderr()[-2000:]
    assert "Traceback" not in "".join(d.stderr() for d in [*first.daemons, *joiners])

    records = history.records
    verdict = check(records, model="linearizable", method="certificate", drained=True)
    assert verdict.ok, verdict.describe()
    inserted = Counter(r.value for r in records if r.op == "enqueue")
    removed = Counter(r.value for r in records if r.op == "dequeue" and r.value is not None)
    assert removed == inserted, (inserted - removed, removed - inserted)
    assert all(n == 1 for n in removed.values())
    produced = sorted(
        (r.ord, r.value) for r in records if r.op == "dequeue" and r.value and r.value[0] == "p"
    )
    assert [v for _, v in produced] == [f"p-{i:04d}" for i in range(PRODUCED)]


def test_a_lone_daemon_joins_a_cluster(skueued_cluster: Callable[..., Cluster]) -> None:
    """``skueue join`` makes a running one-process cluster join another; one that holds
    elements is refused with a clear error and keeps them."""
    cluster = skueued_cluster(2)
    lone = skueued_cluster(1)
    loaded = skueued_cluster(1)
    target, seed = lone.addresses[0], cluster.addresses[0]

    async def main() -> None:
        with trio.fail_after(60):
            await steps()

    async def steps() -> None:
        async with skueue.connect(loaded.addresses[0]) as q:
            await q.enqueue(b"kept")
            with pytest.raises(skueue.RequestRejected, match="holds elements"):
                await q.join(seed)
            assert await q.dequeue() == b"kept"
        async with skueue.connect(target) as q:
            await q.join(seed)
            await q.enqueue_many([b"x1", b"x2"])
        async with skueue.connect(cluster.addresses[1]) as q:
            assert await q.dequeue_many(3) == [b"x1", b"x2"]  # only elements, no padding
            stats = await q.stats()
        assert target in {m["process"] for m in stats["members"]}

    trio.run(main)
