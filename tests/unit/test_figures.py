"""The experiment's figures show every point they have (issue 28, items 18 and 21).

A single n drew the tree-height estimate as a lone point above the y limit; a Figure 4
point without requests (NaN, at small p, n and rounds) made the y limit 1.0, cutting off
every point above it, and vanished from the plot and the table without a word.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from skueue.core.ops import Structure
from skueue.sim import figures
from skueue.sim.figures import plot_rounds_vs_n, plot_rounds_vs_probability
from skueue.sim.results import NO_REQUESTS, rate_table, size_table
from skueue.sim.sweep import mean_rounds, no_requests, run_point
from tests.unit.plot_checks import (
    assert_legend_covers_no_data,
    assert_lines_inside_the_axes,
    the_axes,
)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    caught: list[Figure] = []
    real = figures._save

    def save(figure: Figure, path: Path | str) -> Path:
        caught.append(figure)
        return real(figure, path)

    monkeypatch.setattr(figures, "_save", save)
    return caught


def single_n_rows() -> list[dict[str, Any]]:
    # n = 2: the tree is 3 high, so the estimate (4.5) is far above every mean (~2).
    return [run_point(Structure.QUEUE, 2, ratio, 0, rounds=20) for ratio in (0.0, 0.5, 1.0)]


def rate_rows() -> list[dict[str, Any]]:
    """Figure 4 rows where p = 0.1 made no request (NaN) and comes first."""
    rows: list[dict[str, Any]] = []
    for structure in ("queue", "stack"):
        for p, mean in ((0.1, math.nan), (0.5, 1.5), (1.0, 1.5)):
            rows.append({"structure": structure, "n": 2, "ratio": 0.5, "p": p,
                         "mean_rounds": mean, "tree_height": 3})
    return rows


def test_a_single_n_keeps_the_tree_height_estimate_on_the_axes(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    plot_rounds_vs_n(single_n_rows(), tmp_path / "fig2.png", "Figure 2: t")
    (figure,) = drawn
    assert_lines_inside_the_axes(figure)
    ax = the_axes(figure)
    (estimate,) = [ln for ln in ax.get_lines() if ln.get_label() == "1.5 × tree height"]
    assert len(estimate.get_xdata()) >= 2, "one point of a dashed line draws nothing"
    assert set(estimate.get_ydata()) == {4.5}
    assert_legend_covers_no_data(figure)


def test_figure4_keeps_its_points_on_the_chart_when_a_probability_made_no_request(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    plot_rounds_vs_probability(rate_rows(), tmp_path / "fig4.png")
    (figure,) = drawn
    ax = the_axes(figure)
    assert ax.get_ylim()[1] > 1.5, "the points at 1.5 are on the chart"
    assert_lines_inside_the_axes(figure)
    assert_legend_covers_no_data(figure)
    label = ax.get_xlabel()
    assert "not drawn, no request made: queue at p = 0.1; stack at p = 0.1" in label
    assert ax.get_title().startswith("Figure 4: "), "titled like Figures 2 and 3"


def test_tables_say_no_requests_instead_of_nan() -> None:
    table = rate_table(rate_rows())
    assert "nan" not in table
    assert f"| 0.1 | {NO_REQUESTS} | {NO_REQUESTS} |" in table
    assert "| 0.5 | 1.5 | 1.5 |" in table
    rows = [dict(r, p=None, ratio=0.5, n=n) for n, r in ((2, rate_rows()[0]),
                                                         (4, rate_rows()[1]))]
    assert f"| 2 | 3 | {NO_REQUESTS} |" in size_table(rows)


def test_a_seed_without_requests_does_not_poison_the_mean() -> None:
    rows = [{"structure": "queue", "p": 0.1, "mean_rounds": m} for m in (math.nan, 3.0, 5.0)]
    curves = mean_rounds(rows, "p", "structure")
    assert curves["queue"][0.1] == 4.0
    assert no_requests(curves) == []
    assert no_requests(mean_rounds(rows[:1], "p", "structure")) == [("queue", 0.1)]
