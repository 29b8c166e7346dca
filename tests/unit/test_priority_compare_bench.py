"""bench/priority_compare.py: what a round shows (throughput, PEI, verdict, counts) and
when the run fails, on hand-made rounds, without starting any server."""

from __future__ import annotations

from skueue.check.history import Record
from tests.unit.bench_scripts import load_bench

bench = load_bench("priority_compare")


def a_round(*, inverted: bool, ords: bool = True) -> object:
    """Two elements at levels 1 and 0; the dequeues take them in priority order, or not."""
    first, second = ("low", "top") if inverted else ("top", "low")

    def o(i: int) -> int | None:
        return i if ords else None

    records = [
        Record("p0", 0, "enqueue", "low", 0.0, 1.0, ord=o(0), queue="q", priority=1),
        Record("p0", 1, "enqueue", "top", 2.0, 3.0, ord=o(1), queue="q"),
        Record("c0", 0, "dequeue", first, 4.0, 5.0, ord=o(2), queue="q"),
        Record("c0", 1, "dequeue", second, 6.0, 7.0, ord=o(3), queue="q"),
    ]
    return bench.Round("skueue" if ords else "rabbitmq", 2, records, 8.0)


def test_a_priority_order_round_scores_zero_and_passes() -> None:
    row = bench.round_row(a_round(inverted=False))
    assert row["ops_per_second"] == 4 / 8.0
    assert (row["pei_by_order"]["max"], row["pei_observed"]["max"]) == (0, 0)
    assert row["linearizable"] and (row["lost"], row["duplicated"]) == (0, 0)
    assert bench.row_ok({**row, "verdicts": [row["verdict"]]})


def test_an_inversion_shows_in_both_measures_and_fails_the_run() -> None:
    row = bench.round_row(a_round(inverted=True))
    assert row["pei_by_order"]["max"] == 1 and row["pei_observed"]["max"] == 1
    assert not row["linearizable"]
    assert not bench.row_ok(row)


def test_without_ord_only_the_observed_bound_is_given() -> None:
    row = bench.round_row(a_round(inverted=True, ords=False))
    assert row["pei_by_order"] is None and row["pei_observed"]["max"] == 1
    assert bench.row_ok(row)  # a peer's inversion is measured, not a failure of the run


def test_smoke_is_tiny_and_skueue_alone() -> None:
    args = bench.parse_args(["--smoke"])
    assert (args.elements, args.rounds, args.daemons, args.systems, args.json) == (
        80, 1, 2, ["skueue"], None)  # fmt: skip
    full = bench.parse_args([])
    assert full.systems == ["skueue", "rabbitmq"] and full.json == bench.DEFAULT_JSON
