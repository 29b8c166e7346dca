"""What every e2e workload must satisfy: the checkers, and exactly-once delivery."""

from __future__ import annotations

import collections

from skueue.check.checker import check
from skueue.check.history import Record
from skueue.cluster.loadgen import LoadConfig, LoadResult


def assert_exactly_once(records: list[Record]) -> None:
    """Every inserted element was removed exactly once; nothing else was removed."""
    inserted = collections.Counter(str(r.value) for r in records if r.inserts)
    removed = collections.Counter(r.value for r in records if not r.inserts and r.value)
    assert all(n == 1 for n in inserted.values()), "an element was inserted twice"
    twice = sorted(v for v, n in removed.items() if n > 1)
    assert not twice, f"removed more than once: {twice[:10]}"
    invented = sorted(set(removed) - set(inserted))
    assert not invented, f"removed but never inserted: {invented[:10]}"
    lost = sorted(set(inserted) - set(removed))
    assert not lost, f"inserted but never removed (lost): {lost[:10]} of {len(lost)}"


def assert_history_ok(result: LoadResult, config: LoadConfig) -> None:
    records = result.records
    drain_client = f"c{config.clients}"
    workload = [r for r in records if r.process != drain_client]
    # Every operation completed (of those started, where the workload was stopped).
    assert result.stopped_early or result.workload_ops == config.ops, result.workload_ops
    assert 0 < len(workload) == result.workload_ops, (
        f"{len(workload)} of {result.workload_ops} operations completed")
    assert len(records) - len(workload) >= 1, "the drain removed nothing, not even 'empty'"
    assert all(r.ord is not None for r in records), "a reply came without its ord"
    for model in ("linearizable", "sc"):
        verdict = check(records, model=model, method="certificate", drained=True)
        assert verdict.ok, verdict.describe()
    assert_exactly_once(records)


def assert_accounted(
    records: list[Record], unknown_inserts: list[str], unknown_removals: int
) -> dict[str, int]:
    """Exactly once, where some operations' outcomes were never learned.

    ``records`` are the operations that returned (a drain to empty among them);
    ``unknown_inserts`` the elements of enqueues whose outcome is unknown (each may be in
    the queue or not) and ``unknown_removals`` the number of dequeues whose outcome is
    unknown (each may have taken one element that nobody received).  Every acknowledged
    element came out exactly once, save at most one per unknown dequeue; nothing came out
    twice; nothing came out that was not enqueued.  With no unknown outcome this is
    :func:`assert_exactly_once` plus the checkers.  Returns the counts, for the report."""
    acked = collections.Counter(str(r.value) for r in records if r.inserts)
    removed = collections.Counter(r.value for r in records if not r.inserts and r.value)
    assert all(n == 1 for n in acked.values()), "an element was inserted twice"
    twice = sorted(v for v, n in removed.items() if n > 1)
    assert not twice, f"removed more than once: {twice[:10]}"
    invented = sorted(set(removed) - set(acked) - set(unknown_inserts))
    assert not invented, f"removed but never inserted: {invented[:10]}"
    lost = sorted(set(acked) - set(removed))
    assert len(lost) <= unknown_removals, (
        f"acknowledged but never removed (lost): {lost[:10]} of {len(lost)}, with "
        f"{unknown_removals} dequeues of unknown outcome to explain them"
    )
    if not unknown_inserts and not unknown_removals:
        for model in ("linearizable", "sc"):
            verdict = check(records, model=model, method="certificate", drained=True)
            assert verdict.ok, verdict.describe()
        assert_exactly_once(records)
    return {
        "acknowledged": len(acked),
        "removed": sum(removed.values()),
        "unknown_inserts": len(unknown_inserts),
        "unknown_inserts_removed": len(set(unknown_inserts) & set(removed)),
        "unknown_removals": unknown_removals,
        "lost": len(lost),
    }
