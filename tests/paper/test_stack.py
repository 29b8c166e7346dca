"""The distributed stack (paper §VI, SPEC §7): intervals, tickets, local combining,
the stage-4 wait, constant batch size (Theorem 20) and sequential consistency
(Theorem 21).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from skueue.check.checker import check
from skueue.check.history import Record
from skueue.core.anchor import StackAnchor
from skueue.core.batch import Batch, RunGrant, combine_all, split_grants
from skueue.core.effects import Complete, Effect, Send
from skueue.core.intake import OwnBuffer
from skueue.core.messages.stages import Get, Put
from skueue.core.ops import Op, OpKind, Structure
from skueue.dht.keys import position_key
from skueue.dht.table import Table
from skueue.overlay.labels import LABEL_SPACE
from skueue.overlay.ring import ring_nodes
from skueue.sim.cluster import build_cluster, process_ids
from skueue.sim.rounds import SyncConfig, SyncSim
from tests.paper._histories import STACK_ASYNC, STACK_SWEEP, Case, history, ids, ord_of

# -- Stage 2 for the stack -----------------------------------------------------------


def _reference_stack(
    last: int, ticket: int, counts: tuple[int, ...]
) -> tuple[list[list[tuple[int, int]]], int, int]:
    """SPEC §7 verbatim: per run, the (position, ticket) pairs in hand-out order."""
    out = []
    for i, b in enumerate(counts, start=1):
        if i % 2 == 1:
            out.append([(last + k, ticket + k) for k in range(1, b + 1)])
            last += b
            ticket += b
        else:
            out.append([(p, ticket) for p in range(last, max(last - b + 1, 1) - 1, -1)])
            last = max(last - b, 0)
    return out, last, ticket


def _pairs(g: RunGrant) -> list[tuple[int, int]]:
    return [(g.position(i), g.ticket_of(i)) for i in range(g.available)]


def test_stack_stage2_pushes_take_last_plus_one_and_pops_take_the_top_first() -> None:
    """Push runs get positions last+1..last+b with fresh tickets; Pop runs get last,
    last-1, ... (max first) paired with the current ticket; pops beyond the size get no
    position; ``ticket`` never decreases.

    Reference: §VI
    """
    anchor = StackAnchor()
    g = anchor.assign(Batch.of(3, 2, 1, 5))
    assert [_pairs(x) for x in g] == [
        [(1, 1), (2, 2), (3, 3)],
        [(3, 3), (2, 3)],
        [(2, 4)],
        [(2, 4), (1, 4)],
    ]
    assert (anchor.last, anchor.ticket) == (0, 4)

    rng = random.Random(20)
    anchor, last, ticket = StackAnchor(), 0, 0
    for _ in range(300):
        counts = tuple(rng.randrange(5) for _ in range(rng.randrange(1, 5)))
        expected, last, ticket_next = _reference_stack(last, ticket, counts)
        assert ticket_next >= ticket
        ticket = ticket_next
        grants = anchor.assign(Batch.of(*counts))
        assert [_pairs(x) for x in grants] == expected, counts
        assert (anchor.last, anchor.ticket) == (last, ticket)


def test_stack_stage3_pop_intervals_split_from_the_top() -> None:
    """Push intervals split like Enqueue intervals (lowest positions to the first
    sub-batch); Pop intervals split from the top: the first sub-batch takes the highest
    positions, and Pops left over when the interval runs out get none.

    Reference: §VI
    """
    anchor = StackAnchor()
    anchor.assign(Batch.of(5))  # positions 1..5 with tickets 1..5
    subs = [Batch.of(0, 2, 1), Batch.of(0, 3, 2), Batch.of(0, 2)]
    grants = anchor.assign(combine_all(subs))  # (0, 7, 3)
    parts = split_grants(grants, subs)
    assert [_pairs(p[1]) for p in parts] == [[(5, 5), (4, 5)], [(3, 5), (2, 5), (1, 5)], []]
    assert [_pairs(p[2]) for p in parts[:2]] == [[(1, 6)], [(2, 7), (3, 8)]]
    assert (anchor.last, anchor.ticket) == (3, 8)


# -- The DHT's ticket rule -----------------------------------------------------------


def test_stack_ticket_rule_pop_takes_largest_ticket_not_above_its_own() -> None:
    """A Pop (p, t) removes the entry at p with the largest ticket <= t; entries pushed
    later (larger tickets) are left alone, and a Pop with no such entry waits.

    Reference: §VI
    """
    table: Table[str, str] = Table()
    for ticket, element in ((2, "a"), (5, "b"), (9, "c")):
        assert table.put(7, element, ticket) == []
    assert table.get(7, "pop1", 6) == (True, "b")
    assert table.get(7, "pop2", 9) == (True, "c")
    assert table.get(7, "pop3", 1) == (False, None)  # nothing with ticket <= 1: waits
    assert table.get(7, "pop4", 2) == (True, "a")
    assert len(table) == 0
    # The waiting Pop is served by the first Put with a ticket <= its own only.
    assert table.put(7, "late", 3) == []
    assert table.put(7, "early", 1) == [("pop3", "early")]
    assert len(table) == 1


_ORDERS = {
    "in order": ("push1", "pop1", "push2", "pop2"),
    "push2 overtakes pop1": ("push1", "push2", "pop1", "pop2"),
    "pops overtake each other": ("push1", "push2", "pop2", "pop1"),
    "pop1 before push1": ("pop1", "push1", "push2", "pop2"),
}


@pytest.mark.parametrize("order", list(_ORDERS), ids=list(_ORDERS))
def test_stack_paper_example_push_pop_push_pop(order: str) -> None:
    """The paper's example: Push1, Pop1, Push2, Pop2 in separate batches get (1,1),
    (1,1), (1,2), (1,2).  The positions repeat, but tickets keep both elements, and
    whenever Push1 has landed before Pop2 (which the stage-4 wait guarantees, since they
    are at least two batches apart), every arrival order at the node for position 1
    gives Pop1 -> Push1's element and Pop2 -> Push2's.

    Reference: §VI
    """
    anchor = StackAnchor()
    got = []
    for counts in ((1,), (0, 1), (1,), (0, 1)):
        grants = anchor.assign(Batch.of(*counts))
        got.append(_pairs(grants[len(counts) - 1]))
    assert got == [[(1, 1)], [(1, 1)], [(1, 2)], [(1, 2)]]

    table: Table[str, str] = Table()
    results: dict[str, str] = {}
    for request in _ORDERS[order]:
        if request.startswith("push"):
            ticket = 1 if request == "push1" else 2
            for waiter, element in table.put(1, f"x{ticket}", ticket):
                results[waiter] = element
        else:
            ticket = 1 if request == "pop1" else 2
            found, popped = table.get(1, request, ticket)
            if found:
                assert popped is not None
                results[request] = popped
    assert results == {"pop1": "x1", "pop2": "x2"}
    assert len(table) == 0


def test_stack_paper_example_tickets_alone_do_not_suffice() -> None:
    """The scenario the stage-4 wait exists for: if Pop2 reaches position 1 after Push1
    but before Push2, it takes Push1's element and Pop1 finds nothing it may take.

    Reference: §VI
    """
    table: Table[str, str] = Table()
    assert table.put(1, "x1", 1) == []
    assert table.get(1, "pop2", 2) == (True, "x1")
    assert table.get(1, "pop1", 1) == (False, None)
    assert table.put(1, "x2", 2) == []  # ticket 2 > 1: Pop1 keeps waiting
    assert table.waiting_count() == 1


# -- Local combining and the batch form (Theorem 20) ---------------------------------


def _buffer(kinds: list[bool]) -> OwnBuffer:
    buf = OwnBuffer(Structure.STACK)
    for i, push in enumerate(kinds):
        buf.add(Op(i, OpKind.PUSH, f"e{i}") if push else Op(i, OpKind.POP))
    return buf


def test_stack_local_combining_ith_pop_takes_ith_last_push() -> None:
    """A node that buffers Pushes followed by Pops matches them at once: the i-th Pop
    takes the i-th last Push, and no DHT position is used for the pairs.

    Reference: §VI
    """
    k = 4
    buf = _buffer([True] * k + [False] * k)
    assert buf.batch().counts == (0, 0, 0)
    grants = StackAnchor().assign(buf.batch())
    out = buf.assign(grants)
    pops = [a for a in out if not a.op.kind.inserts]
    assert [a.combined_value for a in pops] == [f"e{k - 1 - i}" for i in range(k)]
    assert all(a.combined and a.position is None for a in out)
    assert sorted(a.ord for a in out) == list(range(2 * k))
    # Matched pairs keep program order in ord as well.
    assert [a.ord for a in out] == sorted(a.ord for a in out)

    # The same through a real process: values come back without any Put or Get.
    driver = _Driver(Structure.STACK, 3)
    pid = "p1"
    op_ids = [driver.submit(pid, OpKind.PUSH, f"v{i}") for i in range(k)]
    op_ids += [driver.submit(pid, OpKind.POP) for _ in range(k)]
    driver.run()
    values = [driver.done[(pid, i)].value for i in op_ids[k:]]
    assert values == [f"v{k - 1 - i}" for i in range(k)]
    assert driver.dht_messages == 0


def _local_stack_form(kinds: list[bool]) -> tuple[int, int]:
    """Unmatched Pops and Pushes after matching on a plain local stack."""
    open_pushes = 0
    pops = 0
    for push in kinds:
        if push:
            open_pushes += 1
        elif open_pushes:
            open_pushes -= 1
        else:
            pops += 1
    return pops, open_pushes


def test_theorem20_local_buffers_have_the_form_pops_then_pushes() -> None:
    """After local combining a node's own batch is (0, pops, pushes): three entries
    whatever the sequence, with pops = Pops that found no local Push and pushes = Pushes
    that no later local Pop took.

    Reference: §VI, Theorem 20
    """
    rng = random.Random(21)
    for _ in range(500):
        kinds = [rng.random() < rng.random() for _ in range(rng.randrange(1, 40))]
        batch = _buffer(kinds).batch()
        pops, pushes = _local_stack_form(kinds)
        assert batch.counts == (0, pops, pushes), kinds
        assert batch.operations == len(kinds)  # every op still gets a rank


@pytest.mark.parametrize(
    ("rate", "probability", "insert_ratio"),
    [(10, None, 0.5), (10, None, 0.8), (0, 0.3, 0.5), (0, 1.0, 0.5), (0, 1.0, 0.2)],
)
def test_theorem20_stack_batches_have_constant_size(
    rate: int, probability: float | None, insert_ratio: float
) -> None:
    """Stack batches never have more than three entries, at any request rate, up to one
    request per process per round (where the queue's batches grow with log n).

    Reference: §VI, Theorem 20
    """
    config = SyncConfig(
        processes=64,
        structure=Structure.STACK,
        rounds=100,
        rate=rate,
        per_node_probability=probability,
        insert_ratio=insert_ratio,
        seed=20,
    )
    result = SyncSim(config).run()
    assert result.records, "no requests were generated"
    assert result.largest_batch <= 3, f"largest batch {result.largest_batch}; {config!r}"
    if probability == 1.0:
        queue = SyncSim(
            SyncConfig(
                processes=64, rounds=100, per_node_probability=1.0, insert_ratio=0.5, seed=20
            )
        ).run()
        assert queue.largest_batch > 3  # the bound is the stack's, not the simulator's


# -- The stage-4 wait ----------------------------------------------------------------


class _Driver:
    """A hand-run cluster: tick everything, deliver what is not held back."""

    def __init__(self, structure: Structure, processes: int) -> None:
        self.procs = build_cluster(process_ids(processes), structure)
        self.flight: list[Send] = []
        self.done: dict[tuple[str, int], Complete] = {}
        self.dht_messages = 0

    def _apply(self, pid: str, effects: list[Effect]) -> None:
        for e in effects:
            if isinstance(e, Send):
                self.flight.append(e)
                self.dht_messages += isinstance(e.message, Put | Get)
            else:
                self.done[(pid, e.op_id)] = e

    def submit(self, pid: str, kind: OpKind, value: str | None = None) -> int:
        p = self.procs[pid]
        op = p.new_op(kind, value)
        self._apply(pid, p.submit(op))
        return op.op_id

    def run(self, hold: Callable[[object], bool] = lambda m: False, steps: int = 200) -> None:
        for _ in range(steps):
            for pid, p in self.procs.items():
                self._apply(pid, p.tick())
            deliver = [s for s in self.flight if not hold(s.message)]
            self.flight = [s for s in self.flight if hold(s.message)]
            for s in deliver:
                self._apply(s.to.process, self.procs[s.to.process].handle(s.to, s.message))


def _owner_process(position: int, pids: list[str]) -> str:
    """The process whose node u satisfies u <= k(p) < succ(u) (global view: test only)."""
    key = position_key("default", position)
    assert 0 <= key < LABEL_SPACE
    nodes = ring_nodes(pids)
    below = [n for n in nodes if n.label <= key]
    return (below[-1] if below else nodes[-1]).process


@pytest.mark.parametrize("structure", [Structure.STACK, Structure.QUEUE], ids=["stack", "queue"])
def test_stack_stage4_waits_for_own_dht_operations(structure: Structure) -> None:
    """A stack node does not start its next batch until its own Puts and Gets have
    finished: while the Put of an earlier Push is held back in the network, a later Push
    of the same process is not served.  (The queue has no such wait: there the later
    Enqueue completes while the Put is still in flight.)

    Reference: §VI
    """
    n = 4
    pids = process_ids(n)
    owner = _owner_process(1, pids)
    pid = next(p for p in pids if p != owner)
    insert = OpKind.PUSH if structure is Structure.STACK else OpKind.ENQUEUE
    driver = _Driver(structure, n)

    def hold(message: object) -> bool:
        return isinstance(message, Put)

    first = driver.submit(pid, insert, "a")
    driver.run(hold)
    assert (pid, first) in driver.done and driver.done[(pid, first)].position == 1
    assert any(isinstance(s.message, Put) for s in driver.flight), "the Put was not held"
    second = driver.submit(pid, insert, "b")
    driver.run(hold)
    if structure is Structure.STACK:
        assert (pid, second) not in driver.done, "a new batch started before the Put landed"
    else:
        assert (pid, second) in driver.done
    driver.run()  # release the Put
    assert (pid, second) in driver.done
    assert driver.done[(pid, second)].position == 2


# -- Theorem 21 ----------------------------------------------------------------------


def _replay_against_list(records: tuple[Record, ...], case: Case) -> None:
    ords = [r.ord for r in records]
    assert None not in ords and len(set(ords)) == len(ords), f"bad ords; replay: {case.replay}"
    previous: dict[str, int] = {}
    for r in sorted(records, key=lambda r: (r.process, r.seq)):
        assert previous.get(r.process, -1) < ord_of(r), (
            f"program order broken at {r.describe()}; replay: {case.replay}"
        )
        previous[r.process] = ord_of(r)
    stack: list[str] = []
    for r in sorted(records, key=ord_of):
        if r.op == "push":
            assert r.value is not None
            stack.append(r.value)
        else:
            expected = stack.pop() if stack else None
            assert r.value == expected, (
                f"{r.describe()} but the replay gives {expected!r}; replay: {case.replay}"
            )
    assert not stack, f"{len(stack)} elements were never popped; replay: {case.replay}"


@pytest.mark.parametrize("case", STACK_ASYNC + STACK_SWEEP, ids=ids(STACK_ASYNC + STACK_SWEEP))
def test_theorem21_stack_sequentially_consistent_under_adversarial_schedules(
    case: Case,
) -> None:
    """Stack histories of adversarial asynchronous schedules are sequentially
    consistent: the ord order replays on a plain list (LIFO) and respects program order,
    and the checker agrees (the exact search too, for small histories).  The longer
    two- and three-process schedules are the ones where the stage-4 wait matters: every
    Pop has to come back (a stuck run raises SimStuck naming the waiting nodes).

    Reference: §VI, Theorem 21
    """
    records = history(case)
    assert {r.op for r in records} <= {"push", "pop"}
    _replay_against_list(records, case)
    verdict = check(records, model="sc", structure="stack", drained=True)
    assert verdict.ok, f"{verdict.describe()}; replay: {case.replay}"
    if case.processes <= 2 and case.operations <= 150:
        exact = check(
            records, model="sc", method="exact", structure="stack", drained=True, exact_ops_max=400
        )
        assert exact.ok, f"{exact.describe()}; replay: {case.replay}"
