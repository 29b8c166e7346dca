"""PNG plots of the paper's Figures 2-4 from sweep rows (:mod:`skueue.sim.sweep`).

Needs matplotlib, which comes with the ``spark`` extra (``pip install 'skueue[spark]'``);
nothing else in :mod:`skueue.sim` does.

We draw on a bare :class:`matplotlib.figure.Figure` with the Agg canvas instead of going
through ``pyplot``: pyplot keeps global state and picks a backend for the whole process,
which a library must not do to the program that imports it (and Agg needs no display).

Rows may come straight from :func:`~skueue.sim.sweep.run_point` or back from a CSV;
several seeds of one point are averaged.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from skueue.sim.sweep import mean_rounds, number

# Small files: these PNGs are committed next to the CSVs.
SIZE_INCHES = (7.0, 4.5)
DPI = 100
_INSERT_NAME = {"queue": "Enqueue", "stack": "Push"}
# Distinct hollow markers, so curves that coincide exactly (the queue's ratios 0 and 1 do)
# stay visible on top of each other instead of one hiding the other.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _new_figure() -> Figure:
    figure = Figure(figsize=SIZE_INCHES, dpi=DPI)
    FigureCanvasAgg(figure)  # attaches itself; savefig then renders with Agg
    return figure


def plot_rounds_vs_n(
    rows: Iterable[Mapping[str, object]], path: Path | str, title: str | None = None
) -> Path:
    """Figures 2 and 3: mean rounds per request against ``n`` (log2 axis), one curve per ratio.

    A dashed grey line shows 1.5 x the aggregation-tree height, the dominant term of the
    paper's estimate (1.5 h plus DHT routing rounds), so the gap to it is the DHT part.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to plot")
    structures = sorted({str(r["structure"]) for r in rows})
    insert = "/".join(_INSERT_NAME.get(s, "insert") for s in structures)
    heights: dict[float, list[float]] = defaultdict(list)
    for row in rows:
        heights[number(row, "n")].append(number(row, "tree_height"))

    figure = _new_figure()
    ax = figure.add_subplot()
    tops: list[float] = []
    for i, (ratio, curve) in enumerate(mean_rounds(rows, "n", "ratio").items()):
        _curve(ax, curve, i, f"{insert} ratio {ratio:g}")
        tops.extend(curve.values())
    ns = sorted(heights)
    ax.plot(
        ns,
        [1.5 * statistics.fmean(heights[n]) for n in ns],
        linestyle="--",
        color="grey",
        label="1.5 × tree height",
    )
    ax.set_xscale("log", base=2)
    # One labelled tick per simulated n, written as plain integers (not 2^k).
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.tick_params(axis="x", labelrotation=45 if len(ns) > 8 else 0)
    ax.set_xlabel("number of processes n (log2 scale)")
    ax.set_ylabel("mean rounds per request")
    _y_from_zero(ax, tops)
    ax.set_title(title or f"Skueue {'/'.join(structures)}: rounds per request vs n")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    figure.tight_layout()
    return _save(figure, path)


def plot_rounds_vs_probability(
    rows: Iterable[Mapping[str, object]], path: Path | str, title: str | None = None
) -> Path:
    """Figure 4: mean rounds per request against the per-node request probability."""
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to plot")
    sizes = sorted({int(number(r, "n")) for r in rows})
    ratios = sorted({number(r, "ratio") for r in rows})

    figure = _new_figure()
    ax = figure.add_subplot()
    tops: list[float] = []
    for i, (structure, curve) in enumerate(mean_rounds(rows, "p", "structure").items()):
        _curve(ax, curve, i, str(structure))
        tops.extend(curve.values())
    ax.set_xlabel("per-node request probability p (per round)")
    ax.set_ylabel("mean rounds per request")
    _y_from_zero(ax, tops)
    n_text = ", ".join(str(n) for n in sizes)
    ratio_text = ", ".join(f"{r:g}" for r in ratios)
    ax.set_title(
        title
        or f"Skueue: rounds per request vs request probability\n"
        f"(n = {n_text}, insert ratio {ratio_text})"
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    figure.tight_layout()
    return _save(figure, path)


def _curve(ax: Axes, curve: Mapping[float, float], index: int, label: str) -> None:
    ax.plot(
        list(curve),
        list(curve.values()),
        marker=_MARKERS[index % len(_MARKERS)],
        markersize=6,
        markerfacecolor="none",
        label=label,
    )


def _y_from_zero(ax: Axes, values: Iterable[float]) -> None:
    # Rounds start at zero so curves compare by ratio, not by offset; headroom keeps the
    # top point off the frame (autoscaling does not add any once the bottom is pinned).
    top = max(values, default=1.0)
    ax.set_ylim(0, top * 1.1 if top > 0 else 1.0)


def _save(figure: Figure, path: Path | str) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return out
