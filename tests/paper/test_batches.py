"""Batches and the anchor's intervals for the queue (paper §III, SPEC §5-6), and the
batch-size bound of Theorem 18.

The expected values are derived here from the paper's formulas, written out
independently of the code under test: a run-length encoding for Definition 5, the
stage-2 formulas over ``first``/``last``, and a per-operation hand-out for stage 3.
"""

from __future__ import annotations

import math
import random

import pytest

from skueue.core.anchor import QueueAnchor
from skueue.core.batch import Batch, Batches, RunGrant, combine_all, split_grants
from skueue.sim.rounds import SyncConfig, SyncSim

# -- Definition 5 -------------------------------------------------------------------


def _runs(ops: list[bool]) -> tuple[int, ...]:
    """Definition 5 by hand: odd entries count Enqueues (True), even ones Dequeues."""
    runs: list[int] = []
    for enq in ops:
        want_odd = enq  # entry index k (1-based) is odd for Enqueues
        if runs and (len(runs) % 2 == 1) == want_odd:
            runs[-1] += 1
        else:
            if not runs and not enq:
                runs.append(0)  # a buffer that starts with a Dequeue
            runs.append(1)
    return tuple(runs)


def _build(ops: list[bool]) -> Batch:
    return Batch.of_order(ops)


def test_definition5_append_keeps_local_order_as_runs() -> None:
    """Appending an Enqueue increments b_k for odd k, else starts b_{k+1} = 1; a Dequeue
    likewise for even k; so a batch is the run-length encoding of the local order.

    Reference: §III-A, Definition 5
    """
    E, D = True, False
    assert Batch().counts == () and Batch().is_empty
    assert _build([E]).counts == (1,)
    assert _build([D]).counts == (0, 1)
    assert _build([E, E, D, E]).counts == (2, 1, 1)
    assert _build([D, D, E, D, D, D]).counts == (0, 2, 1, 3)
    rng = random.Random(5)
    for _ in range(300):
        ops = [rng.random() < 0.5 for _ in range(rng.randrange(0, 30))]
        b = _build(ops)
        assert b.counts == _runs(ops), ops
        assert b.slots == b.counts  # a queue operation needs exactly one rank
        assert b.operations == len(ops)


def test_definition5_combine_is_elementwise_with_missing_entries_zero() -> None:
    """Combining B and B' gives b''_i = b_i + b'_i, missing entries counting as 0; the
    join/leave counters add up as well, and each named queue's batch combines with the
    same queue's only.

    Reference: §III-A, Definition 5
    """
    assert Batch.of(1, 2).combine(Batch.of(3, 0, 4)).counts == (4, 2, 4)
    assert Batch.of(3, 0, 4).combine(Batch.of(1, 2)).counts == (4, 2, 4)
    assert Batch().combine(Batch.of(0, 5)).counts == (0, 5)
    assert Batches(joins=1, leaves=2).combine(Batches(joins=3)).joins == 4
    assert Batches(joins=1, leaves=2).combine(Batches(leaves=3)).leaves == 5
    rng = random.Random(6)
    for _ in range(200):
        parts = [Batch.of(*(rng.randrange(4) for _ in range(rng.randrange(6)))) for _ in range(4)]
        width = max(len(p.counts) for p in parts)
        expected = tuple(sum(p.counts[i] for p in parts if i < len(p.counts)) for i in range(width))
        assert combine_all(parts).counts == expected
    a = Batches(((("a", False), Batch.of(1, 2)), (("b", False), Batch.of(0, 1))), nodes=1)
    b = Batches(((("a", False), Batch.of(3)), (("a", True), Batch((0, 1, 0), (0, 1, 0)))))
    assert a.combine(b) == Batches(
        (
            (("a", False), Batch.of(4, 2)),
            (("a", True), Batch((0, 1, 0), (0, 1, 0))),
            (("b", False), Batch.of(0, 1)),
        ),
        nodes=1,
    )


# -- Stage 2: the anchor's intervals -------------------------------------------------


def _reference_queue_intervals(
    first: int, last: int, counts: tuple[int, ...]
) -> tuple[list[tuple[int, int]], int, int]:
    """SPEC §6 stage 2 verbatim: closed intervals [lo, hi] (hi < lo means empty)."""
    out = []
    for i, b in enumerate(counts, start=1):
        if i % 2 == 1:
            out.append((last + 1, last + b))
            last += b
        else:
            out.append((first, min(first + b - 1, last)))
            first = min(first + b, last + 1)
    return out, first, last


def _interval(g: RunGrant) -> tuple[int, int]:
    return (g.first, g.first + g.available - 1)


def test_stage2_queue_intervals_follow_first_and_last() -> None:
    """Odd runs get [last+1, last+b_i] and then last += b_i; even runs get
    [first, min(first+b_i-1, last)] and then first := min(first+b_i, last+1).

    Reference: §III-D (Stage 2)
    """
    anchor = QueueAnchor()
    assert (anchor.first, anchor.last) == (1, 0)
    grants = anchor.assign(Batch.of(3, 1, 2, 2))
    assert [_interval(g) for g in grants] == [(1, 3), (1, 1), (4, 5), (2, 3)]
    assert (anchor.first, anchor.last, anchor.size()) == (4, 5, 2)
    # Ranks: the anchor serves the runs one after another (§V's virtual counter).
    assert [g.ord_first for g in grants] == [0, 3, 4, 6]
    assert anchor.ord_next == 8

    rng = random.Random(7)
    anchor, first, last, ord_next = QueueAnchor(), 1, 0, 0
    for _ in range(300):
        counts = tuple(rng.randrange(5) for _ in range(rng.randrange(1, 7)))
        expected, first2, last2 = _reference_queue_intervals(first, last, counts)
        grants = anchor.assign(Batch.of(*counts))
        for g, (lo, hi), b in zip(grants, expected, counts, strict=True):
            if hi >= lo:
                assert _interval(g) == (lo, hi), counts
            else:
                assert g.available == 0, counts
            assert g.ord_first == ord_next
            ord_next += b
        first, last = first2, last2
        assert (anchor.first, anchor.last) == (first, last)
        assert anchor.first <= anchor.last + 1  # the invariant of §III-D


def test_stage2_dequeues_beyond_the_size_get_no_position() -> None:
    """On an empty queue a Dequeue run gets an empty interval and ``first`` stays put; a
    run longer than the queue gets only the occupied positions, the rest return empty.

    Reference: §III-D (Stage 2)
    """
    anchor = QueueAnchor()
    (g,) = anchor.assign(Batch.of(0, 3))[1:]
    assert g.available == 0 and (anchor.first, anchor.last) == (1, 0)
    grants = anchor.assign(Batch.of(2, 5))
    assert _interval(grants[0]) == (1, 2)
    assert _interval(grants[1]) == (1, 2) and grants[1].available == 2
    assert (anchor.first, anchor.last, anchor.size()) == (3, 2, 0)
    # The queue stays consistent afterwards: the next Enqueue gets position 3.
    grants = anchor.assign(Batch.of(1, 1))
    assert _interval(grants[0]) == (3, 3) and _interval(grants[1]) == (3, 3)


def test_lemma10_unit_empty_dequeues_are_the_tail_of_their_run() -> None:
    """Within one run of Dequeues split over sub-batches, the Dequeues that get no
    position are exactly the last ones in the run's order, and the queue is then empty.

    Reference: §V, Lemma 10
    """
    anchor = QueueAnchor()
    anchor.assign(Batch.of(4))  # positions 1..4 occupied
    subs = [Batch.of(0, 2), Batch.of(0, 1), Batch.of(0, 3), Batch.of(0, 2)]
    grants = anchor.assign(combine_all(subs))
    parts = split_grants(grants, subs)
    got = [p[1].available for p in parts]
    assert got == [2, 1, 1, 0]  # 8 Dequeues, 4 elements: the last 4 in order are empty
    assert anchor.size() == 0


# -- Stage 3: decomposition ----------------------------------------------------------


def _positions(g: RunGrant) -> list[int]:
    return [g.position(i) for i in range(g.available)]


def test_stage3_split_hands_out_intervals_in_sub_batch_order() -> None:
    """Sub-batch j takes the next b^j_i positions of an Enqueue interval, and the next
    b^j_i positions of a Dequeue interval while they last; ranks are handed out in the
    same order.

    Reference: §III-E (Stage 3)
    """
    anchor = QueueAnchor()
    anchor.assign(Batch.of(2))  # occupied: 1..2
    subs = [Batch.of(1, 2), Batch.of(2), Batch.of(0, 1, 1), Batch.of(3, 1)]
    grants = anchor.assign(combine_all(subs))  # combined (6, 4, 1)
    parts = split_grants(grants, subs)
    assert [len(p) for p in parts] == [2, 1, 3, 2]
    # Enqueues of the batch: positions 3..8 in sub-batch order.
    assert [_positions(p[0]) for p in parts] == [[3], [4, 5], [], [6, 7, 8]]
    # Dequeues: 4 wanted, 8 occupied (1..8): positions 1..4 in sub-batch order.
    assert _positions(parts[0][1]) == [1, 2]
    assert _positions(parts[2][1]) == [3]
    assert _positions(parts[3][1]) == [4]
    assert _positions(parts[2][2]) == [9]
    # Ranks: run 1 starts at ord 2, run 2 at ord 8, run 3 at ord 12.
    assert [p[0].ord_first for p in parts] == [2, 3, 5, 5]
    assert [parts[j][1].ord_first for j in (0, 2, 3)] == [8, 10, 11]

    # Randomised against a per-operation hand-out.
    rng = random.Random(8)
    anchor = QueueAnchor()
    for _ in range(200):
        subs = [
            Batch.of(*(rng.randrange(4) for _ in range(rng.randrange(0, 5))))
            for _ in range(rng.randrange(1, 5))
        ]
        grants = anchor.assign(combine_all(subs))
        parts = split_grants(grants, subs)
        for i, g in enumerate(grants):
            pool = _positions(g)
            rank = g.ord_first
            for sub, part in zip(subs, parts, strict=True):
                if i >= len(sub.counts):
                    continue
                b = sub.counts[i]
                want, pool = pool[:b], pool[b:]
                assert _positions(part[i]) == want
                assert part[i].ord_first == rank
                rank += b


# -- Theorem 18 ----------------------------------------------------------------------


@pytest.mark.parametrize(("processes", "rounds"), [(16, 150), (64, 150), (256, 90)])
def test_theorem18_batches_stay_logarithmic_at_one_request_per_round(
    processes: int, rounds: int
) -> None:
    """With every process generating one request per round, the largest batch (in runs)
    stays O(log n).

    The proof's argument: a batch gains at most one run per request, a process gets one
    request per round, and a node sends its next batch once the previous one came back,
    which takes about twice the tree height (Corollary 6).  So runs <= 2 * height + 2.
    With random kinds about half of the requests open a new run, so the observed value
    is close to the height, which is about 4-6 log2 n here: c = 8 leaves room without
    admitting a batch that grows with the run's length (at n = 16, 150 rounds are about
    five round trips; a batch growing with time would have about 75 runs).

    Reference: §V, Theorem 18
    """
    result = SyncSim(
        SyncConfig(processes=processes, rounds=rounds, per_node_probability=1.0, seed=18)
    ).run()
    assert len(result.records) == processes * rounds  # every request completed
    assert result.largest_batch > 2  # the load really builds multi-run batches
    largest, height = result.largest_batch, result.tree_height
    assert largest <= 2 * height + 2, (largest, height)
    assert result.largest_batch <= 8 * math.log2(processes), result.largest_batch
