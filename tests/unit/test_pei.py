"""PEI, the popped element index of seed 000 (issue 14): skueue/check/pei.py.

Hand-made histories with known answers, and both measures against a brute-force reading
of their definitions on random histories (a failure prints the seed that replays it).
"""

from __future__ import annotations

import math
import random

import pytest

from skueue.check.history import Record
from skueue.check.pei import PeiSummary, pei_by_order, pei_observed


def enq(
    value: str,
    t0: float,
    t1: float,
    *,
    level: int = 0,
    ord: int | None = None,
    process: str = "P",
    seq: int = 0,
    queue: str | None = None,
) -> Record:
    return Record(
        process, seq, "enqueue", value, t0, t1, ord=ord, priority=level or None, queue=queue
    )


def deq(
    value: str | None,
    t0: float,
    t1: float,
    *,
    ord: int | None = None,
    process: str = "C",
    seq: int = 0,
    queue: str | None = None,
) -> Record:
    return Record(process, seq, "dequeue", value, t0, t1, ord=ord, queue=queue)


def test_a_perfect_priority_queue_scores_zero() -> None:
    history = [
        enq("low", 0, 1, level=2, ord=0),
        enq("a", 2, 3, ord=1),
        enq("b", 4, 5, ord=2),
        deq("a", 6, 7, ord=3),
        deq("b", 8, 9, ord=4),
        deq("low", 10, 11, ord=5),
        deq(None, 12, 13, ord=6),
    ]
    assert pei_by_order(history) == [0, 0, 0]
    assert pei_observed(history) == [0, 0, 0]


def test_a_less_urgent_element_taken_first_counts_every_element_ahead_of_it() -> None:
    history = [
        enq("a", 0, 1, ord=0),
        enq("b", 2, 3, ord=1),
        enq("low", 4, 5, level=1, ord=2),
        deq("low", 6, 7, ord=3),  # a and b were ahead of it
        deq("b", 8, 9, ord=4),  # a was ahead of it (FIFO within the level)
        deq("a", 10, 11, ord=5),
    ]
    assert pei_by_order(history) == [2, 1, 0]
    assert pei_observed(history) == [2, 1, 0]


def test_observed_counts_only_what_every_linearization_agrees_on() -> None:
    history = [
        enq("a", 0, 1, level=1, ord=0),
        enq("b", 2, 3, level=1, ord=1),
        deq("a", 6, 7, ord=2),
        enq("urgent", 5, 20, ord=3),  # overlaps the dequeue of a: it may come after it
        deq("b", 30, 35, ord=5),  # urgent is ahead of b, but its removal overlaps: not sure
        deq("urgent", 31, 40, ord=4),
    ]
    assert pei_observed(history) == [0, 0, 0]
    assert pei_by_order(history) == [0, 0, 0]


def test_by_order_follows_the_serialization_not_real_time() -> None:
    history = [
        enq("a", 0, 10, ord=1),
        enq("b", 0, 10, ord=0),  # concurrent inserts: the ord puts b first
        deq("a", 11, 12, ord=2),
        deq("b", 13, 14, ord=3),
    ]
    assert pei_by_order(history) == [1, 0]
    assert pei_observed(history) == [0, 0]  # real time cannot tell a from b


def test_named_queues_are_measured_apart() -> None:
    history = [
        enq("x", 0, 1, ord=0, queue="one"),
        enq("y", 2, 3, ord=0, queue="two"),
        deq("y", 4, 5, ord=1, queue="two"),
        deq("x", 6, 7, ord=1, queue="one"),
    ]
    assert pei_by_order(history) == [0, 0]
    assert pei_observed(history) == [0, 0]


def test_by_order_refuses_a_history_without_ords() -> None:
    with pytest.raises(ValueError, match="ord"):
        pei_by_order([enq("a", 0, 1), deq("a", 2, 3)])


def test_summary_uses_nearest_rank_percentiles() -> None:
    s = PeiSummary.of(list(range(100)))
    assert (s.count, s.median, s.mean, s.p90, s.p99, s.max) == (100, 49.0, 49.5, 89.0, 98.0, 99)
    assert math.isnan(PeiSummary.of([]).median)


# -- against the definitions, on random histories ------------------------------------


def random_history(rng: random.Random, levels: int) -> list[Record]:
    """Overlapping enqueues and dequeues with random levels; dequeues return a random
    present element (so PEIs vary), ords in issue order."""
    records: list[Record] = []
    present: list[tuple[int, int, str]] = []  # (level, ord, value)
    clock = 0.0
    for i in range(rng.randrange(5, 40)):
        clock += rng.random()
        t0, t1 = clock, clock + rng.random() * 3
        if present and rng.random() < 0.45:
            present.sort()
            pick = present.pop(rng.randrange(min(len(present), 3)))
            records.append(deq(pick[2], t0, t1, ord=i, seq=i))
        else:
            lv = rng.randrange(levels)
            records.append(enq(f"v{i}", t0, t1, level=lv, ord=i, seq=i))
            present.append((lv, i, f"v{i}"))
    return records


def brute_by_order(records: list[Record]) -> list[int]:
    present: list[Record] = []
    out = []
    for r in sorted(records, key=lambda r: r.ord):  # type: ignore[arg-type, return-value]
        if r.op == "enqueue":
            present.append(r)
        elif r.value is not None:
            mine = next(x for x in present if x.value == r.value)
            key = (mine.priority or 0, mine.ord)
            out.append(sum((x.priority or 0, x.ord) < key for x in present))  # type: ignore[operator]
            present.remove(mine)
    return out


def brute_observed(records: list[Record]) -> list[int]:
    inserted = {r.value: r for r in records if r.op == "enqueue"}
    removal = {r.value: r for r in records if r.op == "dequeue" and r.value is not None}
    out = []
    for d in sorted(removal.values(), key=lambda r: r.invoke):
        e = inserted[d.value]
        count = 0
        for x in inserted.values():
            gone = removal.get(x.value)
            surely_present = x.response < d.invoke and (gone is None or gone.invoke > d.response)
            lx, le = x.priority or 0, e.priority or 0
            surely_ahead = lx < le or (lx == le and x.response < e.invoke)
            count += x is not e and surely_present and surely_ahead
        out.append(count)
    return out


@pytest.mark.parametrize("seed", range(300))
def test_both_measures_match_their_definitions(seed: int) -> None:
    rng = random.Random(seed)
    history = random_history(rng, levels=rng.choice([1, 2, 4]))
    assert pei_by_order(history) == brute_by_order(history), f"replay with seed={seed}"
    assert pei_observed(history) == brute_observed(history), f"replay with seed={seed}"
