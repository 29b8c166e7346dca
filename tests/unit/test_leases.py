"""Leases in the core (issue 12, item 2; skueue/core/leases.py): a leased remove holds its
element for its consumer until an ack (gone for good) or a return (nack, expiry, return
of all), which inserts it again at the tail with its delivery count and reason; past its
delivery limit a return goes to the queue's dead letters.

The cases drive a small cluster in synchronous rounds with a clock the test moves.  The
random schedules end by draining every queue and check, per value: acked exactly once or
drained exactly once, never held by two leases at once, and delivery counts that go
1, 2, 3... (a failing schedule prints its seed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from skueue.core.errors import ProtocolError
from skueue.core.ops import DEFAULT_QUEUE, Item, Op, OpKind, Redelivered, Structure, plain
from skueue.sim.cluster import build_cluster, process_ids
from tests.unit.test_named_queues import Rounds


@dataclass
class LeaseRounds(Rounds):
    """The named-queue tests' synchronous rounds, with a clock and lease returns."""

    now_ms: int = 0

    def submit(  # type: ignore[override]
        self, pid: str, kind: OpKind, value: Item | None = None, **options: object
    ) -> Op:
        process = self.processes[pid]
        op = process.new_op(kind, value, **options)  # type: ignore[arg-type]
        self.ops[(pid, op.op_id)] = op
        self._take(pid, process.submit(op))
        return op

    def clock(self, ms: int) -> None:
        self.now_ms += ms
        for pid, process in self.processes.items():
            self._take(pid, process.clock(self.now_ms))

    def release(self, pid: str, lease_id: int, reason: str = "nack") -> bool:
        effects = self.processes[pid].release(lease_id, reason)
        if effects is None:
            return False
        self._take(pid, effects)
        return True

    def settled(self) -> bool:
        """... and the returned elements are inserted again."""
        return super().settled() and not any(p.leases.returning for p in self.processes.values())

    def result(self, pid: str, op: Op) -> Item | None:
        return self.done[(pid, op.op_id)].value

    def drain(
        self, pid: str, queue: str = DEFAULT_QUEUE, kind: OpKind = OpKind.DEQUEUE
    ) -> list[Item]:
        out: list[Item] = []
        while True:
            op = self.submit(pid, kind, queue=queue)
            self.run()
            item = self.result(pid, op)
            if item is None:
                return out
            out.append(item)


def cluster(
    n: int = 3, structure: Structure = Structure.QUEUE
) -> tuple[LeaseRounds, list[str]]:
    pids = process_ids(n)
    return LeaseRounds(build_cluster(pids, structure=structure)), pids


def test_a_leased_dequeue_holds_its_element_until_the_ack() -> None:
    r, (a, b, _) = cluster()
    r.submit(a, OpKind.ENQUEUE, "x")
    r.run()
    op = r.submit(b, OpKind.DEQUEUE, lease_ms=1000)
    r.run()
    assert r.result(b, op) == "x"
    lease = r.processes[b].leases.get(op.op_id)
    assert lease is not None and (lease.value, lease.deliveries, lease.deadline_ms) == (
        "x",
        1,
        1000,
    )
    r.clock(999)
    assert r.drain(a) == []  # held: nobody else gets it, and it is not back
    assert r.processes[b].leases.ack(op.op_id)
    assert not r.processes[b].leases.ack(op.op_id)  # an ack ends it once
    r.clock(10_000)
    assert r.drain(a) == []  # acked: gone for good, even past the deadline


def test_a_nack_puts_the_element_back_at_the_tail_with_its_count() -> None:
    r, (a, b, _) = cluster()
    for v in "xy":
        r.submit(a, OpKind.ENQUEUE, v)
    r.run()
    op = r.submit(b, OpKind.DEQUEUE, lease_ms=1000)
    r.run()
    assert r.result(b, op) == "x"
    assert r.release(b, op.op_id)
    assert not r.release(b, op.op_id)  # returned once
    r.run()
    again = r.submit(b, OpKind.DEQUEUE, lease_ms=1000)
    r.run()
    assert r.result(b, again) == "y"  # x went in behind y
    third = r.submit(a, OpKind.DEQUEUE, lease_ms=1000)
    r.run()
    assert r.result(a, third) == Redelivered("x", 1, "nack")
    lease = r.processes[a].leases.get(third.op_id)
    assert lease is not None and (lease.value, lease.deliveries, lease.reason) == ("x", 2, "nack")


def test_an_expired_lease_returns_its_element_and_an_extension_delays_it() -> None:
    r, (a, b, c) = cluster()
    r.submit(a, OpKind.ENQUEUE, "x")
    r.run()
    r.clock(5)
    op = r.submit(b, OpKind.DEQUEUE, lease_ms=100)
    r.run()
    assert r.processes[b].leases.extend(op.op_id, 300) == 305
    r.clock(299)
    assert r.drain(c) == []
    r.clock(1)  # 305: the deadline
    r.run()
    assert [plain(i) for i in r.drain(c)] == ["x"]
    assert r.processes[b].leases.extend(op.op_id, 300) is None  # ended


def test_past_its_delivery_limit_an_element_goes_to_the_dead_letters() -> None:
    r, (a, b, _) = cluster()
    r.submit(a, OpKind.ENQUEUE, "poison", queue="jobs")
    r.run()
    for delivery in (1, 2):
        op = r.submit(b, OpKind.DEQUEUE, queue="jobs", lease_ms=50, max_deliveries=2)
        r.run()
        assert plain(r.result(b, op)) == "poison"  # type: ignore[arg-type]
        assert r.processes[b].leases.get(op.op_id).deliveries == delivery  # type: ignore[union-attr]
        r.clock(50)  # expires
        r.run()
    assert r.drain(a, "jobs") == []
    assert r.drain(a, "jobs.dlq") == [Redelivered("poison", 2, "expired")]


def test_a_stack_takes_a_returned_element_back_on_top() -> None:
    r, (a, b, _) = cluster(structure=Structure.STACK)
    for v in "xy":
        r.submit(a, OpKind.PUSH, v)
        r.run()
    op = r.submit(b, OpKind.POP, lease_ms=1000)
    r.run()
    assert r.result(b, op) == "y"
    r.submit(a, OpKind.PUSH, "z")
    r.run()
    r.release(b, op.op_id)
    r.run()
    assert [plain(i) for i in r.drain(a, kind=OpKind.POP)] == ["y", "z", "x"]


def test_leaving_returns_every_lease_first() -> None:
    r, (a, b, c) = cluster()
    for v in "xyz":
        r.submit(a, OpKind.ENQUEUE, v)
    r.run()
    for _ in range(2):
        r.submit(c, OpKind.DEQUEUE, lease_ms=1000)
    r.run()
    assert len(r.processes[c].leases.table) == 2
    r._take(c, r.processes[c].leave())
    r.run()
    assert not r.processes[c].leases.table
    assert [plain(i) for i in r.drain(a)] == ["z", "x", "y"]


def test_only_a_remove_takes_a_lease() -> None:
    r, (a, _, _) = cluster()
    with pytest.raises(ProtocolError, match="only a remove"):
        r.submit(a, OpKind.ENQUEUE, "x", lease_ms=10)
    with pytest.raises(ProtocolError, match="dead letters"):
        r.submit(a, OpKind.DEQUEUE, queue="q" * 128, lease_ms=10, max_deliveries=1)


@pytest.mark.parametrize("seed", range(12))
def test_random_schedules_lose_nothing_and_never_lease_twice(seed: int) -> None:
    """Enqueues, leased dequeues, acks, nacks and expiries at random on 4 processes, then
    a drain: every value is acked or drained exactly once (or sits in the dead letters),
    no value is held by two leases at once, and its deliveries count 1, 2, 3..."""
    rng = random.Random(seed)
    r, pids = cluster(4)
    limit = rng.choice([0, 2])
    held: dict[tuple[str, int], str] = {}  # (holder, lease id) -> value
    deliveries: dict[str, int] = {}
    acked: list[str] = []
    leased_now: set[str] = set()
    sent = 0
    pending: list[tuple[str, Op]] = []
    for _ in range(100):
        move = rng.random()
        pid = rng.choice(pids)
        if move < 0.25:
            r.submit(pid, OpKind.ENQUEUE, f"v{sent}")
            sent += 1
        elif move < 0.6:
            ms = rng.choice([20, 60, 200])
            pending.append((pid, r.submit(pid, OpKind.DEQUEUE, lease_ms=ms, max_deliveries=limit)))
        elif move < 0.75 and held:
            holder, lease_id = rng.choice(sorted(held))
            value = held.pop((holder, lease_id))
            if r.processes[holder].leases.ack(lease_id):
                acked.append(value)
            leased_now.discard(value)
        elif move < 0.85 and held:
            holder, lease_id = rng.choice(sorted(held))
            value = held.pop((holder, lease_id))
            assert r.release(holder, lease_id), f"seed {seed}"
            leased_now.discard(value)
        else:
            r.clock(rng.choice([10, 30, 100]))
        for (holder, lease_id), value in list(held.items()):
            if r.processes[holder].leases.get(lease_id) is None:  # expired
                del held[(holder, lease_id)]
                leased_now.discard(value)
        r.run(after=rng.randrange(3))
        for pid_, op in list(pending):
            if (pid_, op.op_id) in r.done:
                pending.remove((pid_, op))
                item = r.result(pid_, op)
                if item is None:
                    continue
                lease = r.processes[pid_].leases.get(op.op_id)
                value = str(plain(item))
                assert value not in leased_now, f"seed {seed}: {value} leased twice at once"
                expected = deliveries.get(value, 0) + 1
                assert lease is not None and lease.deliveries == expected, f"seed {seed}: {lease}"
                deliveries[value] = expected
                held[(pid_, op.op_id)] = value
                leased_now.add(value)
    r.run()  # every leased remove has its element: the leases are all in the tables
    for pid in pids:
        r._take(pid, r.processes[pid].return_all("restart"))
    r.run()
    drained = [plain(i) for i in r.drain(pids[0])]
    dead = [plain(i) for i in r.drain(pids[0], "default.dlq")]
    everything = sorted(acked + drained + dead)
    assert everything == sorted(f"v{i}" for i in range(sent)), f"seed {seed}"
    if not limit:
        assert not dead, f"seed {seed}"


def test_a_kept_return_is_no_delivery() -> None:
    r, (a, b, _) = cluster()
    r.submit(a, OpKind.ENQUEUE, "x")
    r.run()
    op = r.submit(b, OpKind.DEQUEUE, lease_ms=10)
    r.run()
    r.release(b, op.op_id, "keep")
    r.run()
    again = r.submit(b, OpKind.DEQUEUE, lease_ms=10)
    r.run()
    assert r.result(b, again) == "x"  # as it was: never delivered
    r.release(b, again.op_id, "nack")
    r.run()
    third = r.submit(b, OpKind.DEQUEUE, lease_ms=10)
    r.run()
    r.release(b, third.op_id, "keep")
    r.run()
    assert r.drain(a) == [Redelivered("x", 1, "nack")]
