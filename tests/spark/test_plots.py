"""The plots of ``skueue analyze`` read as pictures of what happened (issue 8, item 20):
quiet time is a gap at zero, axes say what they count, processes are named.

No Spark here: the plot functions take the collected rows; the figure is caught on its
way to the PNG file and its drawn data inspected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from skueue.analysis import plots
from tests.unit.plot_checks import assert_legend_covers_no_data


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    figures: list[Figure] = []
    real = plots._save

    def save(figure: Figure, path: Path) -> Path:
        figures.append(figure)
        return real(figure, path)

    monkeypatch.setattr(plots, "_save", save)
    return figures


def _line(figure: Figure, label: str) -> Any:
    (ax,) = figure.axes
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return line


def _value_at(line: Any, x: float) -> float:
    """The stepped line's height just after ``x``."""
    xs, ys = list(line.get_xdata()), list(line.get_ydata())
    before = [i for i, x0 in enumerate(xs) if x0 <= x]
    assert before, f"the line starts after {x}"
    return float(ys[before[-1]])


def test_throughput_shows_quiet_bins_as_zero(tmp_path: Path, drawn: list[Figure]) -> None:
    # Completions in seconds 0-2 and 8-9 only, as the table held them before zero-filling.
    rows = [{"hid": 0, "bin": b, "start": 100.0 + b, "width": 1.0, "kind": k, "count": 10,
             "rate": 10.0} for b in (0, 1, 2, 8, 9) for k in ("enqueue", "dequeue")]
    plots.plot_throughput(rows, "seconds", "t", tmp_path / "throughput.png")
    (figure,) = drawn
    total = _line(figure, "all")
    for second in (3, 4.5, 7):
        assert _value_at(total, second) == 0, f"nothing completed at {second} s"
    assert _value_at(total, 0.5) == 20 and _value_at(total, 8.5) == 20
    ax = figure.axes[0]
    assert ax.get_xlim()[0] == 0, "time from the start of the history, not the epoch"
    assert "seconds" in ax.get_xlabel() and "per second" in ax.get_ylabel()


def test_storage_names_every_process_on_integer_ticks(tmp_path: Path, drawn: list[Figure]
                                                      ) -> None:
    rows = [{"hid": 0, "process": p, "stored": s, "held": h}
            for p, s, h in (("n1", 5, 0), ("n2", 9, 2), ("n3", 7, 1), ("n4", 0, 0))]
    plots.plot_storage(rows, "s", tmp_path / "storage.png")
    (figure,) = drawn
    ax = figure.axes[0]
    figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["n2", "n3", "n1", "n4"]
    assert all(float(x).is_integer() for x in ax.get_xticks())
    assert all(float(y).is_integer() for y in ax.get_yticks()), "entries are counted"
    assert ax.get_xlabel() and "entries" in ax.get_ylabel()


def test_events_draw_every_second_of_the_log(tmp_path: Path, drawn: list[Figure]) -> None:
    t0 = 1_767_225_600.0
    rows = [{"start": t0 + s, "level": lv, "count": n}
            for s, lv, n in ((0, "info", 3), (1, "info", 1), (3, "info", 2), (3, "warning", 1))]
    plots.plot_events(rows, "e", tmp_path / "events.png")
    (figure,) = drawn
    ax = figure.axes[0]
    info, warning = _line(figure, "info"), _line(figure, "warning")
    assert _value_at(info, 2.5) == 0, "the quiet second is a gap"
    assert _value_at(warning, 0.5) == 0 and _value_at(warning, 3.5) == 1
    assert max(warning.get_xdata()) - min(warning.get_xdata()) >= 4, "one series, whole span"
    assert ax.get_xlim() == (0.0, 4.0)
    assert "second" in ax.get_xlabel() and "events" in ax.get_ylabel()
    figure.canvas.draw()
    assert all(float(y).is_integer() for y in ax.get_yticks()), "events are counted"


def test_batches_histogram_counts_whole_batches(tmp_path: Path, drawn: list[Figure]) -> None:
    plot_batches = getattr(plots, "plot_batches", None)
    assert plot_batches is not None, "a plot of the batches sent up the tree"
    rows = [{"node": n, "size": s} for n, s in
            (("left", 0), ("left", 0), ("left", 3), ("middle", 5), ("right", 3))]
    plot_batches(rows, "b", tmp_path / "batches.png")
    (figure,) = drawn
    ax = figure.axes[0]
    figure.canvas.draw()
    assert "operations" in ax.get_xlabel() and "batches" in ax.get_ylabel()
    assert all(float(x).is_integer() for x in ax.get_xticks())
    assert all(float(y).is_integer() for y in ax.get_yticks())
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    heights = sorted(round(p.get_height()) for p in bars if p.get_height())
    assert sum(heights) == 5, heights  # every batch counted once (stacked per node)


def _zigzag(bins: int, covered_last: float = 1.0) -> list[dict[str, Any]]:
    """Two kinds whose rates alternate 0 and 10 every bin: lines everywhere, no free
    corner for a legend inside the axes."""
    return [{"hid": 0, "bin": b, "start": float(b), "width": 1.0,
             "covered": covered_last if b == bins - 1 else 1.0, "kind": k,
             "count": 10 * ((b + i) % 2), "rate": 10.0 * ((b + i) % 2)}
            for b in range(bins) for i, k in enumerate(("enqueue", "dequeue"))]


def test_throughput_legend_covers_no_line(tmp_path: Path, drawn: list[Figure]) -> None:
    # The legend sat on the "all" line of a real bench run.
    plots.plot_throughput(_zigzag(40), "seconds", "t", tmp_path / "throughput.png")
    (figure,) = drawn
    assert_legend_covers_no_data(figure)


def test_storage_legend_covers_no_bar_of_a_single_process(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    rows = [{"hid": 0, "process": "127.0.0.1:7401", "stored": 1474, "held": 3}]
    plots.plot_storage(rows, "s", tmp_path / "storage.png", member_source="--members")
    (figure,) = drawn
    assert_legend_covers_no_data(figure)
    assert "--members" in figure.axes[0].get_xlabel(), "says where the members came from"


def test_a_partial_last_bin_is_drawn_at_its_rate_over_its_part(
    tmp_path: Path, drawn: list[Figure]
) -> None:
    # The span ends 0.6 into the last bin, which held 6 completions: a rate of 10 over
    # that part, drawn up to 9.6 s (over the whole bin it read 6: a cliff at the end).
    rows = [{"hid": 0, "bin": b, "start": float(b), "width": 1.0,
             "covered": 0.6 if b == 9 else 1.0, "kind": "enqueue",
             "count": 6 if b == 9 else 10, "rate": 10.0} for b in range(10)]
    plots.plot_throughput(rows, "seconds", "t", tmp_path / "throughput.png")
    (figure,) = drawn
    total = _line(figure, "all")
    assert _value_at(total, 9.3) == 10
    assert max(total.get_xdata()) == pytest.approx(9.6)
    assert figure.axes[0].get_xlim()[1] == pytest.approx(9.6)


def test_a_sliver_of_a_last_bin_is_left_out(tmp_path: Path, drawn: list[Figure]) -> None:
    # One completion in the last 0.01 of a bin is no rate of 100 per second.
    rows = _zigzag(10, covered_last=0.01)
    assert len(plots.rated_bins(rows)) == len(rows) - 2
    plots.plot_throughput(rows, "seconds", "t", tmp_path / "throughput.png")
    (figure,) = drawn
    assert max(_line(figure, "all").get_xdata()) == pytest.approx(9.0)
