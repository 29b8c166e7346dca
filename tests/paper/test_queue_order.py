"""The order lemmas of the queue (paper §V) and sequential consistency (Theorem 14).

Each lemma is checked on histories from the synchronous simulator (the paper's runtime
model) and from the adversarial scheduler (any delivery order).  Records carry the
anchor's ``position`` and ``ord``, which is exactly the information the lemmas speak
about: ``ord`` is the paper's virtual counter and ``<`` the order it defines.  A failing
assertion prints the expression that replays the case.
"""

from __future__ import annotations

from collections import deque

import pytest

from skueue.check.checker import check
from skueue.check.history import Record
from tests.paper._histories import (
    QUEUE_ASYNC,
    QUEUE_CASES,
    Case,
    history,
    ids,
    ord_of,
    position_of,
)


def _split(records: tuple[Record, ...]) -> tuple[list[Record], list[Record]]:
    enqs = [r for r in records if r.op == "enqueue"]
    deqs = [r for r in records if r.op == "dequeue"]
    assert len(enqs) + len(deqs) == len(records)
    assert all(r.ord is not None for r in records), "every record must carry its ord"
    return enqs, deqs


def _by_ord(records: list[Record]) -> list[Record]:
    return sorted(records, key=ord_of)


def _assert_positions_follow_ord(records: list[Record], case: Case) -> None:
    """p < p'  implies  ord < ord'  (and positions are distinct)."""
    positioned = _by_ord([r for r in records if r.position is not None])
    for a, b in zip(positioned, positioned[1:], strict=False):
        assert position_of(a) < position_of(b), (
            f"{a.describe()} precedes {b.describe()} in ord but not in position; "
            f"replay: {case.replay}"
        )


@pytest.mark.parametrize("case", QUEUE_CASES, ids=ids(QUEUE_CASES))
def test_lemma7_dequeue_positions_increase_with_ord(case: Case) -> None:
    """Two Dequeues that got positions p < p' have ord(p) < ord(p').

    Reference: §V, Lemma 7
    """
    _, deqs = _split(history(case))
    _assert_positions_follow_ord(deqs, case)
    # An empty Dequeue gets no position, and only those: a returned element has one.
    for d in deqs:
        assert (d.position is None) == (d.value is None), f"{d.describe()}; replay: {case.replay}"


@pytest.mark.parametrize("case", QUEUE_CASES, ids=ids(QUEUE_CASES))
def test_lemma8_enqueue_positions_increase_with_ord(case: Case) -> None:
    """Two Enqueues with positions p < p' have ord(p) < ord(p'); the anchor hands out
    positions 1, 2, 3, ... to Enqueues in ord order without gaps.

    Reference: §V, Lemma 8
    """
    enqs, _ = _split(history(case))
    assert all(e.position is not None for e in enqs), f"Enqueue without position: {case.replay}"
    _assert_positions_follow_ord(enqs, case)
    assert [e.position for e in _by_ord(enqs)] == list(range(1, len(enqs) + 1)), case.replay


@pytest.mark.parametrize("case", QUEUE_CASES, ids=ids(QUEUE_CASES))
def test_lemma9_enqueue_at_p_precedes_dequeue_at_p(case: Case) -> None:
    """A Dequeue with position p comes after the Enqueue with position p in ord, and an
    Enqueue at p comes before every Dequeue at p.

    Reference: §V, Lemma 9
    """
    enqs, deqs = _split(history(case))
    enq_at = {e.position: e for e in enqs}
    deqs_at: dict[int, list[Record]] = {}
    for d in deqs:
        if d.position is not None:
            deqs_at.setdefault(d.position, []).append(d)
            e = enq_at.get(d.position)
            assert e is not None, f"{d.describe()}: no Enqueue got that position; {case.replay}"
            assert ord_of(e) < ord_of(d), f"{e.describe()} vs {d.describe()}; replay: {case.replay}"
    for e in enqs:
        for d in deqs_at.get(position_of(e), []):
            assert ord_of(e) < ord_of(d), f"{e.describe()} vs {d.describe()}; replay: {case.replay}"
    # Positions of removes are unique too, so "the" Dequeue at p is well defined.
    assert all(len(v) == 1 for v in deqs_at.values()), case.replay


@pytest.mark.parametrize("case", QUEUE_CASES, ids=ids(QUEUE_CASES))
def test_lemma10_after_an_empty_dequeue_the_run_stays_empty(case: Case) -> None:
    """When a Dequeue returns empty, the queue is empty at that point of the ord order,
    and every Dequeue after it up to the next Enqueue (in particular the rest of its run)
    returns empty too.

    The history does not show run boundaries, but a run of Dequeues occupies consecutive
    ords, so the maximal stretch of Dequeues in ord order that contains the empty one
    contains the rest of its run: the claim checked here implies the lemma's.

    Reference: §V, Lemma 10
    """
    records = _by_ord(list(history(case)))
    size = 0  # enqueues minus successful dequeues so far, in ord order
    empty_since: Record | None = None
    empties = 0
    for r in records:
        if r.op == "enqueue":
            size += 1
            empty_since = None
            continue
        if r.value is None:
            empties += 1
            assert size == 0, (
                f"{r.describe()} returned empty with {size} elements in front of it in ord; "
                f"replay: {case.replay}"
            )
            empty_since = r
        else:
            assert empty_since is None, (
                f"{r.describe()} returned an element after {empty_since.describe()} returned "
                f"empty with no Enqueue in between; replay: {case.replay}"
            )
            size -= 1
    if case.insert_ratio <= 0.5:
        assert empties, f"workload never emptied the queue, the lemma was not exercised: {case.id}"


@pytest.mark.parametrize("case", QUEUE_CASES, ids=ids(QUEUE_CASES))
def test_corollary11_no_older_element_after_an_empty_dequeue(case: Case) -> None:
    """If a Dequeue returns empty, no Dequeue with a larger ord returns an element whose
    Enqueue has a smaller ord than the empty Dequeue.

    Reference: §V, Corollary 11
    """
    enqs, deqs = _split(history(case))
    enq_ord = {e.value: ord_of(e) for e in enqs}
    empties = sorted(ord_of(d) for d in deqs if d.value is None)
    for d in deqs:
        if d.value is None:
            continue
        assert d.value in enq_ord, f"{d.describe()} returned an element nobody enqueued"
        for o in empties:
            if o >= ord_of(d):
                break
            assert enq_ord[d.value] > o, (
                f"{d.describe()} returned an element enqueued at ord {enq_ord[d.value]}, "
                f"before an empty Dequeue at ord {o}; replay: {case.replay}"
            )


@pytest.mark.parametrize("case", QUEUE_CASES, ids=ids(QUEUE_CASES))
def test_lemma12_dequeue_positions_were_enqueued_and_lower_ones_dequeued_earlier(
    case: Case,
) -> None:
    """A Dequeue assigned position p: an Enqueue with a lower ord was assigned p, and
    every Enqueue with a position p' < p was dequeued by a Dequeue with a lower ord
    (dequeue intervals always start at the lowest occupied position).

    Reference: §V, Lemma 12
    """
    enqs, deqs = _split(history(case))
    enq_at = {e.position: e for e in enqs}
    taker_ord = {d.value: ord_of(d) for d in deqs if d.value is not None}
    # prefix_max[p]: the largest ord of the Dequeues that took positions 1..p-1
    # (None when one of them was never dequeued).
    top = max((d.position for d in deqs if d.position is not None), default=0)
    prefix_max: list[int | None] = [-1]
    for p in range(1, top + 1):
        prev = prefix_max[-1]
        e = enq_at.get(p)
        taken = None if e is None or e.value is None else taker_ord.get(e.value)
        prefix_max.append(None if prev is None or taken is None else max(prev, taken))
    for d in deqs:
        if d.position is None:
            continue
        e = enq_at.get(d.position)
        assert e is not None and ord_of(e) < ord_of(d), f"{d.describe()}; replay: {case.replay}"
        below = prefix_max[d.position - 1]
        assert below is not None and below < ord_of(d), (
            f"{d.describe()}: a lower position was not dequeued before it in ord "
            f"(latest {below}); replay: {case.replay}"
        )


def _replay_against_deque(records: tuple[Record, ...], case: Case) -> None:
    """The deliberately simple oracle: replay in ord order on collections.deque."""
    ords = [r.ord for r in records]
    assert len(set(ords)) == len(ords), f"ords are not unique; replay: {case.replay}"
    last_ord: dict[str, int] = {}
    for r in sorted(records, key=lambda r: (r.process, r.seq)):
        prev = last_ord.get(r.process)
        assert prev is None or prev < ord_of(r), (
            f"program order broken at {r.describe()}; replay: {case.replay}"
        )
        last_ord[r.process] = ord_of(r)
    q: deque[str] = deque()
    for r in sorted(records, key=ord_of):
        if r.op == "enqueue":
            assert r.value is not None
            q.append(r.value)
        else:
            expected = q.popleft() if q else None
            assert r.value == expected, (
                f"{r.describe()} but the replay gives {expected!r}; replay: {case.replay}"
            )
    # The adversarial runs end with a drain client removing until empty.
    assert not q, f"{len(q)} elements were never dequeued; replay: {case.replay}"


@pytest.mark.parametrize("case", QUEUE_ASYNC, ids=ids(QUEUE_ASYNC))
def test_theorem14_queue_sequentially_consistent_under_adversarial_schedules(
    case: Case,
) -> None:
    """Histories of adversarial asynchronous schedules are sequentially consistent: the
    ord order replays on a plain deque and respects program order; the checker agrees;
    and, for small histories, the exact search (which ignores ord) agrees as well.

    Reference: §V, Theorem 14
    """
    records = history(case)
    _replay_against_deque(records, case)
    verdict = check(records, model="sc", drained=True)
    assert verdict.ok, f"{verdict.describe()}; replay: {case.replay}"
    if case.processes <= 2:
        exact = check(records, model="sc", method="exact", drained=True, exact_ops_max=400)
        assert exact.ok, f"{exact.describe()}; replay: {case.replay}"
