"""PNG plots of the paper's Figures 2-4 from sweep rows (:mod:`skueue.sim.sweep`).

Needs matplotlib, which comes with the ``spark`` extra (``pip install 'skueue[spark]'``);
nothing else in :mod:`skueue.sim` does.

The figure and the legend's place come from :mod:`skueue.sim.canvas`.

Rows may come straight from :func:`~skueue.sim.sweep.run_point` or back from a CSV;
several seeds of one point are averaged.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from skueue.sim.canvas import legend_outside, new_figure
from skueue.sim.sweep import CurveKey, mean_rounds, no_requests, number

_INSERT_NAME = {"queue": "Enqueue", "stack": "Push"}
LONE_N_SPREAD = 1.25
"""With a single n, the tree-height estimate spans n / this .. n x this (log2 axis)."""
FIGURE4_TITLE = "Figure 4: Skueue, mean rounds per request vs request probability"
# Distinct hollow markers, so curves that coincide exactly (the queue's ratios 0 and 1 do)
# stay visible on top of each other instead of one hiding the other.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def plot_rounds_vs_n(
    rows: Iterable[Mapping[str, object]], path: Path | str, title: str | None = None
) -> Path:
    """Figures 2 and 3: mean rounds per request against ``n`` (log2 axis), one curve per ratio.

    A dashed grey line shows 1.5 x the aggregation-tree height, the dominant term of the
    paper's estimate (1.5 h plus DHT routing rounds), so the gap to it is the DHT part;
    the y axis takes it in too (with a single n it is a short segment around that n).
    """
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to plot")
    structures = sorted({str(r["structure"]) for r in rows})
    insert = "/".join(_INSERT_NAME.get(s, "insert") for s in structures)
    heights: dict[float, list[float]] = defaultdict(list)
    for row in rows:
        heights[number(row, "n")].append(number(row, "tree_height"))

    figure = new_figure()
    ax = figure.add_subplot()
    tops: list[float] = []
    curves = mean_rounds(rows, "n", "ratio")
    for i, (ratio, curve) in enumerate(curves.items()):
        _curve(ax, curve, i, f"{insert} ratio {ratio:g}")
        tops.extend(curve.values())
    ns = sorted(heights)
    estimate = [1.5 * statistics.fmean(heights[n]) for n in ns]
    tops.extend(estimate)
    # A line through one point draws nothing: a lone n gets a short level segment.
    xs = ns if len(ns) > 1 else [ns[0] / LONE_N_SPREAD, ns[0] * LONE_N_SPREAD]
    ys = estimate if len(ns) > 1 else estimate * 2
    ax.plot(xs, ys, linestyle="--", color="grey", label="1.5 × tree height")
    if len(ns) == 1:
        ax.set_xlim(ns[0] / LONE_N_SPREAD**2, ns[0] * LONE_N_SPREAD**2)
    ax.set_xscale("log", base=2)
    # One labelled tick per simulated n, written as plain integers (not 2^k).
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ns, [str(int(n)) for n in ns])
    ax.tick_params(axis="x", labelrotation=45 if len(ns) > 8 else 0)
    ax.set_xlabel("number of processes n (log2 scale)"
                  + _not_drawn(curves, lambda r: f"ratio {r:g}", "n"))
    ax.set_ylabel("mean rounds per request")
    _y_from_zero(ax, tops)
    ax.set_title(title or f"Skueue {'/'.join(structures)}: rounds per request vs n")
    ax.grid(True, alpha=0.3)
    legend_outside(ax)
    figure.tight_layout()
    return _save(figure, path)


def plot_rounds_vs_probability(
    rows: Iterable[Mapping[str, object]], path: Path | str, title: str | None = None
) -> Path:
    """Figure 4: mean rounds per request against the per-node request probability.

    Probabilities where no run made a request (small n, p and rounds) have no mean: they
    are named under the x axis, not dropped without a word.
    """
    rows = list(rows)
    if not rows:
        raise ValueError("no rows to plot")
    sizes = sorted({int(number(r, "n")) for r in rows})
    ratios = sorted({number(r, "ratio") for r in rows})

    figure = new_figure()
    ax = figure.add_subplot()
    tops: list[float] = []
    curves = mean_rounds(rows, "p", "structure")
    for i, (structure, curve) in enumerate(curves.items()):
        _curve(ax, curve, i, str(structure))
        tops.extend(curve.values())
    ax.set_xlabel("per-node request probability p (per round)"
                  + _not_drawn(curves, str, "p"))
    ax.set_ylabel("mean rounds per request")
    _y_from_zero(ax, tops)
    n_text = ", ".join(str(n) for n in sizes)
    ratio_text = ", ".join(f"{r:g}" for r in ratios)
    ax.set_title(
        title
        or f"{FIGURE4_TITLE}\n(n = {n_text}, insert ratio {ratio_text})"
    )
    ax.grid(True, alpha=0.3)
    legend_outside(ax)
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


def _not_drawn(
    curves: Mapping[CurveKey, Mapping[float, float]],
    name: Callable[[CurveKey], str],
    x: str,
) -> str:
    """A second line for the x label naming the points without requests, or ``""``."""
    missing: dict[CurveKey, list[float]] = defaultdict(list)
    for curve, at in no_requests(curves):
        missing[curve].append(at)
    if not missing:
        return ""
    parts = [f"{name(c)} at {x} = {', '.join(f'{v:g}' for v in at)}" for c, at in missing.items()]
    return "\nnot drawn, no request made: " + "; ".join(parts)


def _y_from_zero(ax: Axes, values: Iterable[float]) -> None:
    # Rounds start at zero so curves compare by ratio, not by offset; headroom keeps the
    # top point off the frame (autoscaling does not add any once the bottom is pinned).
    # A point without requests is NaN, which max() would return if it came first.
    top = max((v for v in values if math.isfinite(v)), default=1.0)
    ax.set_ylim(0, top * 1.1 if top > 0 else 1.0)


def _save(figure: Figure, path: Path | str) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return out
