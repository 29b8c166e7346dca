"""The experiment library, its tables and its plots (SPEC §9): fast checks on tiny runs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from skueue.cli.skueue import main
from skueue.core.ops import Structure
from skueue.sim.figures import plot_rounds_vs_n, plot_rounds_vs_probability
from skueue.sim.results import (
    fit_rounds_per_doubling,
    read_csv,
    slope,
    slope_table,
    sort_key,
    write_csv,
)
from skueue.sim.sweep import (
    PROBABILITIES,
    RATIOS,
    ROW_FIELDS,
    Point,
    check_sizes,
    figure2_points,
    figure3_points,
    figure4_points,
    mean_rounds,
    number,
    percentile,
    run,
    run_point,
    sizes,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("structure", [Structure.QUEUE, Structure.STACK])
def test_run_point_returns_a_sane_flat_row(structure: Structure) -> None:
    row = run_point(structure, n=4, ratio=0.5, seed=1, rounds=20)
    assert tuple(row) == ROW_FIELDS
    assert row["structure"] == structure.value
    assert (row["n"], row["ratio"], row["p"], row["seed"]) == (4, 0.5, None, 1)
    # The paper's load: 10 requests a round, and the run drains until all complete.
    assert row["requests"] == 200
    mean, p50, p99 = (number(row, k) for k in ("mean_rounds", "p50", "p99"))
    assert 0 <= p50 <= p99
    assert 0 < mean <= p99
    assert number(row, "tree_height") >= 1
    assert number(row, "largest_batch") >= 1
    assert number(row, "messages_per_request") > 0
    lo, avg, hi = (number(row, k) for k in ("entries_min", "entries_mean", "entries_max"))
    assert 0 <= lo <= avg <= hi
    assert number(row, "wall_seconds") >= 0


def test_run_point_is_deterministic_apart_from_the_clock() -> None:
    a = run_point(Structure.QUEUE, 8, 0.75, seed=3, rounds=15)
    b = run(Point(Structure.QUEUE, 8, 0.75, 3, rounds=15))
    a.pop("wall_seconds")
    b.pop("wall_seconds")
    assert a == b


def test_per_node_probability_one_gives_every_process_a_request_each_round() -> None:
    row = run_point(Structure.STACK, 4, 0.5, seed=0, per_node_probability=1.0, rounds=10)
    assert row["p"] == 1.0
    assert row["requests"] == 4 * 10


def test_percentile_is_nearest_rank() -> None:
    data = [1.0, 2.0, 3.0, 4.0]
    assert percentile(data, 50) == 2.0
    assert percentile(data, 99) == 4.0
    assert percentile([7.0], 1) == 7.0
    assert math.isnan(percentile([], 50))


def test_sweeps_cover_the_papers_axes() -> None:
    assert sizes(16) == [2, 4, 8, 16]
    fig2 = list(figure2_points(16, seeds=2))
    assert len(fig2) == 4 * len(RATIOS) * 2
    assert {p.structure for p in fig2} == {Structure.QUEUE}
    assert {p.ratio for p in fig2} == set(RATIOS)
    assert {p.structure for p in figure3_points(8)} == {Structure.STACK}
    fig4 = list(figure4_points(64))
    assert {p.per_node_probability for p in fig4} == set(PROBABILITIES)
    assert {p.structure for p in fig4} == {Structure.QUEUE, Structure.STACK}
    assert {(p.n, p.ratio) for p in fig4} == {(64, 0.5)}


def _synthetic(slopes: dict[float, float]) -> list[dict[str, object]]:
    # mean rounds = intercept + slope * log2 n, with seed noise that cancels per size
    rows: list[dict[str, object]] = []
    for ratio, per_doubling in slopes.items():
        for k in range(1, 9):
            for noise in (-0.5, 0.5):
                rows.append({"structure": "queue", "n": 2**k, "ratio": ratio,
                             "mean_rounds": 3.0 + per_doubling * k + noise, "tree_height": 2 * k,
                             "p": None})
    return rows


def test_fit_recovers_the_slope_per_ratio() -> None:
    fitted = fit_rounds_per_doubling(_synthetic({0.0: 4.0, 0.5: 7.5}))
    assert fitted.keys() == {0.0, 0.5}
    assert fitted[0.0] == pytest.approx(4.0)
    assert fitted[0.5] == pytest.approx(7.5)


def test_fit_reads_rows_back_from_csv_text_and_skips_single_sizes() -> None:
    rows = [{"n": "4", "ratio": "0.25", "mean_rounds": "10"},
            {"n": "16", "ratio": "0.25", "mean_rounds": "16"},
            {"n": "8", "ratio": "1.0", "mean_rounds": "5"}]
    assert fit_rounds_per_doubling(rows) == {0.25: pytest.approx(3.0)}


def test_slope_is_least_squares_and_needs_two_distinct_xs() -> None:
    assert slope([1.0, 2.0, 3.0], [2.0, 4.5, 7.0]) == pytest.approx(2.5)
    with pytest.raises(ValueError, match="two distinct"):
        slope([3.0, 3.0], [1.0, 2.0])


def test_slope_table_fits_the_whole_range_and_the_upper_half() -> None:
    table = slope_table(_synthetic({0.0: 4.0, 0.5: 7.5})).splitlines()
    assert table[0] == ("| ratio | rounds per doubling (n = 2..256) "
                        "| rounds per doubling (n = 32..256) |")
    assert table[2:] == ["| 0 | 4.00 | 4.00 |", "| 0.5 | 7.50 | 7.50 |"]


def test_slope_table_says_when_the_upper_half_is_one_size() -> None:
    rows = [r for r in _synthetic({0.5: 2.0}) if number(r, "n") in (2.0, 4.0)]
    table = slope_table(rows)
    assert "nan" not in table
    assert table.splitlines()[0].endswith("| rounds per doubling (n = 4) |")
    assert table.splitlines()[2] == "| 0.5 | 2.00 | one size: no slope |"
    assert slope_table(rows[:2]) == "(one size only: no slope)"


def test_csv_round_trip_keeps_types_and_order(tmp_path: Path) -> None:
    rows = [run_point(Structure.STACK, 4, 0.5, seed=0, per_node_probability=0.5, rounds=5),
            run_point(Structure.QUEUE, 2, 0.25, seed=1, rounds=5)]
    rows.sort(key=sort_key)
    write_csv(rows, tmp_path / "rows.csv")
    back = read_csv(tmp_path / "rows.csv")
    assert [(r["structure"], r["n"], r["p"]) for r in back] == [("queue", 2, None),
                                                                ("stack", 4, 0.5)]
    assert all(isinstance(r["requests"], int) for r in back)
    assert back[0]["mean_rounds"] == pytest.approx(number(rows[0], "mean_rounds"), abs=1e-4)


def test_mean_rounds_averages_seeds() -> None:
    table = mean_rounds(_synthetic({0.5: 2.0}), "n", "ratio")
    assert table[0.5][2.0] == pytest.approx(5.0)


def test_plots_write_non_empty_pngs(tmp_path: Path) -> None:
    by_n = plot_rounds_vs_n(_synthetic({0.0: 4.0, 1.0: 6.0}), tmp_path / "sub" / "fig2.png")
    rate_rows = [{"structure": s, "n": 64, "ratio": 0.5, "p": p, "mean_rounds": 10 + p}
                 for s in ("queue", "stack") for p in PROBABILITIES]
    by_p = plot_rounds_vs_probability(rate_rows, tmp_path / "fig4.png")
    for path in (by_n, by_p):
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 5_000


def test_plots_refuse_no_rows(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        plot_rounds_vs_n([], tmp_path / "x.png")


def test_max_n_off_the_doubling_axis_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --max-n 3 used to run n = 2 only, without a word, and Figure 4 at n = 256 (405 s).
    with pytest.raises(SystemExit) as exit_:
        main(["experiment", "--max-n", "3"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--max-n 3 is not on the doubling axis from --min-n 2" in err
    assert "use 2 or 4" in err


@pytest.mark.parametrize(
    ("max_n", "min_n", "figure4_n", "expected"),
    [(4096, 2, None, 256), (8, 2, None, 8), (2, 2, None, 2), (64, 2, 16, 16), (12, 3, None, 12)],
)
def test_figure4_n_follows_max_n(
    max_n: int, min_n: int, figure4_n: int | None, expected: int
) -> None:
    assert check_sizes(max_n, min_n, figure4_n) == expected


@pytest.mark.parametrize(
    ("max_n", "min_n", "figure4_n", "message"),
    [
        (3, 2, None, "--max-n 3 is not on the doubling axis from --min-n 2 (2, ...): use 2 or 4"),
        (10, 3, None, "--max-n 10 is not on the doubling axis from --min-n 3 (3, 6, ...)"),
        (2, 4, None, "--max-n 2 is below --min-n 4"),
        (8, 2, 16, "--figure4-n 16 is above --max-n 8"),
    ],
)
def test_sizes_that_cannot_be_run_are_refused(
    max_n: int, min_n: int, figure4_n: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        check_sizes(max_n, min_n, figure4_n)


def test_sweeps_start_at_min_n() -> None:
    assert {p.n for p in figure2_points(12, min_n=3)} == {3, 6, 12}
    assert {p.n for p in figure3_points(16, min_n=4)} == {4, 8, 16}
