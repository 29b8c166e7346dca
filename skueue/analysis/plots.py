"""PNG plots of ``skueue analyze``'s tables (already collected: a few hundred rows at most).

Like :mod:`skueue.sim.figures`, we draw on :mod:`skueue.sim.canvas`'s figure (no pyplot),
with the legend beside the axes, where it covers no data.

Rules every plot keeps, so that a person can read it:

- time series are steps over their bins, and every bin of the span is drawn, with zero
  where nothing happened: a quiet stretch shows as a gap at zero, never as a line drawn
  straight across it; a last bin that the span covers only in part is drawn over that
  part at its rate (a sliver under half a bin is left out: too short for a rate);
- time runs from the start of the history (or the first log event), not from the epoch;
- every axis says what it counts and in which unit; counts get integer ticks;
- per-process plots name the processes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from skueue.sim.canvas import legend_outside, new_figure

PARTIAL_BIN_DRAWN_MIN: Final = 0.5
"""A last bin the span covers less of than this fraction is left out of the plot."""
NAMES_SHOWN_MAX: Final = 48
"""Processes named one by one under the storage bars; above, every k-th name."""
LEVELS: Final = ("critical", "error", "warning", "info", "debug")
LEVEL_COLORS: Final = {"critical": "black", "error": "tab:red", "warning": "tab:orange",
                       "info": "tab:blue", "debug": "tab:grey"}
NODE_COLORS: Final = {"left": "tab:blue", "middle": "tab:orange", "right": "tab:green"}


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _singular(unit: str) -> str:
    return unit[:-1] if unit.endswith("s") else unit


def _steps(
    ax: Axes, width: float, values: Sequence[float], end: float | None = None, **style: Any
) -> None:
    """``values[i]`` over ``[i width, (i+1) width)``, as one stepped line; the last step
    ends at ``end`` when given (a bin the span covers in part)."""
    xs = [i * width for i in range(len(values))]
    xs.append(len(values) * width if end is None else end)
    ax.plot(xs, [*values, values[-1] if values else 0.0], drawstyle="steps-post", **style)


def _covered(b: Mapping[str, Any]) -> float:
    return float(b.get("covered", b["width"]))


def rated_bins(bins: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The throughput bins whose rate means something: all but a last bin that the span
    covers less than :data:`PARTIAL_BIN_DRAWN_MIN` of (one completion in a sliver of
    time would read as a spike)."""
    last = max((int(b["bin"]) for b in bins), default=-1)
    return [b for b in bins if int(b["bin"]) < last or last == 0
            or _covered(b) >= PARTIAL_BIN_DRAWN_MIN * float(b["width"])]


def plot_throughput(
    bins: Sequence[Mapping[str, Any]], unit: str, title: str, path: Path
) -> Path:
    """Completions per time unit over time: the total, and one line per op kind.

    ``bins``: rows of :func:`.stats.throughput` (``bin``, ``width``, ``covered``, ``kind``,
    ``rate``).  Bins missing from ``bins`` count as zero.  The last bin is drawn over
    the part of it the span covers, at its rate there; under half a bin it is left out.
    """
    bins = rated_bins(bins)
    width = float(bins[0]["width"]) if bins else 1.0
    count = max((int(b["bin"]) for b in bins), default=-1) + 1
    last = max((_covered(b) for b in bins if int(b["bin"]) == count - 1), default=width)
    curves: dict[str, list[float]] = defaultdict(lambda: [0.0] * count)
    total = [0.0] * count
    for b in bins:
        i, rate = int(b["bin"]), float(b["rate"])
        curves[str(b["kind"])][i] += rate
        total[i] += rate
    figure = new_figure()
    ax = figure.add_subplot()
    end = (count - 1) * width + last
    if count:
        _steps(ax, width, total, end, color="black", linewidth=2, label="all")
        for k in sorted(curves):
            _steps(ax, width, curves[k], end, linewidth=1, alpha=0.8, label=k)
        ax.set_xlim(0, end)
        legend_outside(ax)
    ax.set_xlabel(f"time since the first operation ({unit}; bins of {width:g})")
    ax.set_ylabel(f"operations completed per {_singular(unit)}")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(figure, path)


def plot_latency(
    rows: Sequence[Mapping[str, Any]], unit: str, title: str, path: Path
) -> Path:
    """p50/p90/p99 latency per op kind as grouped bars (rows of :func:`.stats.latency`)."""
    rows = sorted(rows, key=lambda r: (r["kind"] == "all", str(r["kind"])))
    kinds = [f"{r['kind']}\n({int(r['count'])} ops)" for r in rows]
    scale, shown = (1000.0, "ms") if unit == "seconds" else (1.0, unit)
    figure = new_figure()
    ax = figure.add_subplot()
    width = 0.27
    for i, q in enumerate(("p50", "p90", "p99")):
        values = [float(r[q]) * scale for r in rows]
        ax.bar([k + (i - 1) * width for k in range(len(kinds))], values, width, label=q)
    ax.set_xticks(range(len(kinds)), kinds, fontsize="small")
    ax.set_xlabel("operation kind")
    ax.set_ylabel(f"latency, response - invoke ({shown})")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    legend_outside(ax)
    return _save(figure, path)


def plot_storage(
    rows: Sequence[Mapping[str, Any]], title: str, path: Path, member_source: str = ""
) -> Path:
    """Entries stored per DHT member over the run and still held at the end, most first,
    with the mean; each bar is named by its process (rows of :func:`.stats.storage`).
    ``member_source`` says under the axis where the members came from."""
    rows = sorted(rows, key=lambda r: (-int(r["stored"]), str(r["process"])))
    stored = [int(r["stored"]) for r in rows]
    held = [int(r["held"]) for r in rows]
    names = [str(r["process"]) for r in rows]
    figure = new_figure()
    ax = figure.add_subplot()
    xs = range(len(rows))
    ax.bar(xs, stored, width=0.8, color="tab:blue", label="stored over the run")
    ax.bar(xs, held, width=0.5, color="tab:orange", label="still held at the end")
    if stored:
        mean = sum(stored) / len(stored)
        ax.axhline(mean, color="grey", linestyle="--", label=f"mean stored {mean:.1f}")
    step = max(1, math.ceil(len(rows) / NAMES_SHOWN_MAX))
    ticks = list(xs)[::step]
    longest = max(map(len, names), default=0)
    rotation = 0 if len(ticks) * longest <= 60 else 30 if len(ticks) <= 12 else 90
    ax.set_xticks(ticks, [names[i] for i in ticks], rotation=rotation, fontsize="small",
                  ha="right" if rotation == 30 else "center")
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("DHT member" + (f" (every {step}th named)" if step > 1 else "")
                  + ", most entries first"
                  + (f"\nmembers: {member_source}" if member_source else ""))
    ax.set_ylabel("DHT entries (elements)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    legend_outside(ax)
    return _save(figure, path)


def plot_batches(
    batches: Sequence[Mapping[str, Any]], title: str, path: Path
) -> Path:
    """How many batches had each size, stacked per virtual node (rows: ``node, size``).

    One bar per whole size up to 60 operations, else about 50 whole-number bins (empty
    batches always alone); the
    count axis turns logarithmic when the tallest bar dwarfs the others (empty batches
    of an idle tree usually do).
    """
    sizes: dict[str, list[int]] = defaultdict(list)
    for b in batches:
        sizes[str(b.get("node") or "?")].append(int(b["size"]))
    top = max((max(v) for v in sizes.values()), default=0)
    step = 1 if top <= 60 else math.ceil((top + 1) / 50)
    # Empty batches get a bar of their own: an idle tree sends many.
    edges = [-0.5] + [0.5 + i * step for i in range(math.ceil(top / step) + 1)]
    figure = new_figure()
    ax = figure.add_subplot()
    nodes = [n for n in NODE_COLORS if n in sizes] + sorted(set(sizes) - set(NODE_COLORS))
    counts: list[int] = []
    if nodes:
        values, _, _ = ax.hist([sizes[n] for n in nodes], bins=edges, stacked=True,
                               label=[f"{n} node" for n in nodes],
                               color=[NODE_COLORS.get(n, "tab:grey") for n in nodes],
                               edgecolor="white", linewidth=0.8)
        counts = [int(c) for c in (values[-1] if len(nodes) > 1 else values)]
        legend_outside(ax)
    nonzero = [c for c in counts if c]
    log = bool(nonzero) and max(nonzero) > 50 * min(nonzero)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("operations in the batch" + (f" (bins of {step})" if step > 1 else ""))
    ax.set_ylabel("batches sent up the tree" + (" (log scale)" if log else ""))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if not log:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(figure, path)


def plot_events(
    rows: Sequence[Mapping[str, Any]], title: str, path: Path, width_s: float = 1.0
) -> Path:
    """Log events per time bin, one stepped line per level, every bin of the span drawn
    (rows of :func:`.stats.event_timeline`: ``start`` in epoch seconds)."""
    t0 = min((float(r["start"]) for r in rows), default=0.0)
    count = max((round((float(r["start"]) - t0) / width_s) for r in rows), default=-1) + 1
    curves: dict[str, list[float]] = defaultdict(lambda: [0.0] * count)
    for r in rows:
        curves[str(r["level"])][round((float(r["start"]) - t0) / width_s)] += int(r["count"])
    figure = new_figure()
    ax = figure.add_subplot()
    order = [lv for lv in LEVELS if lv in curves] + sorted(set(curves) - set(LEVELS))
    for level in order:
        _steps(ax, width_s, curves[level], label=level, color=LEVEL_COLORS.get(level),
               linewidth=1.5)
    if count:
        ax.set_xlim(0, count * width_s)
        legend_outside(ax, title="level")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the first log event")
    ax.set_ylabel(f"log events per {width_s:g} s")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(figure, path)
