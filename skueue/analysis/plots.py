"""PNG plots of ``skueue analyze``'s tables (already collected: a few hundred rows at most).

Like :mod:`skueue.sim.plots`, we draw on a bare :class:`~matplotlib.figure.Figure` with the
Agg canvas: pyplot's global state and backend choice are not a library's to take.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

SIZE_INCHES: Final = (7.0, 4.5)
DPI: Final = 100


def _figure() -> Figure:
    figure = Figure(figsize=SIZE_INCHES, dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def plot_throughput(
    bins: Sequence[Mapping[str, Any]], unit: str, title: str, path: Path
) -> Path:
    """Completions per time unit over time: the total, and one line per op kind.

    ``bins``: rows of :func:`.stats.throughput`.
    """
    curves: dict[str, dict[float, float]] = defaultdict(dict)
    total: dict[float, float] = defaultdict(float)
    for b in bins:
        start, rate = float(b["start"]), float(b["rate"])
        curves[str(b["kind"])][start] = rate
        total[start] += rate
    figure = _figure()
    ax = figure.add_subplot()
    xs = sorted(total)
    ax.plot(xs, [total[x] for x in xs], color="black", linewidth=2, label="all")
    for k in sorted(curves):
        ks = sorted(curves[k])
        ax.plot(ks, [curves[k][x] for x in ks], linewidth=1, alpha=0.8, label=k)
    singular = unit[:-1] if unit.endswith("s") else unit
    width = float(bins[0]["width"]) if bins else 0.0
    ax.set_xlabel(f"time ({unit}; bins of {width:g})")
    ax.set_ylabel(f"completed operations per {singular}")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _save(figure, path)


def plot_latency(
    rows: Sequence[Mapping[str, Any]], unit: str, title: str, path: Path
) -> Path:
    """p50/p90/p99 latency per op kind as grouped bars (rows of :func:`.stats.latency`)."""
    rows = sorted(rows, key=lambda r: (r["kind"] == "all", str(r["kind"])))
    kinds = [str(r["kind"]) for r in rows]
    scale, shown = (1000.0, "ms") if unit == "seconds" else (1.0, unit)
    figure = _figure()
    ax = figure.add_subplot()
    width = 0.27
    for i, q in enumerate(("p50", "p90", "p99")):
        values = [float(r[q]) * scale for r in rows]
        ax.bar([k + (i - 1) * width for k in range(len(kinds))], values, width, label=q)
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylabel(f"latency ({shown})")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return _save(figure, path)


def plot_storage(
    rows: Sequence[Mapping[str, Any]], title: str, path: Path
) -> Path:
    """Entries stored per process, sorted, with the mean (rows of :func:`.stats.storage`)."""
    stored = sorted((int(r["stored"]) for r in rows), reverse=True)
    figure = _figure()
    ax = figure.add_subplot()
    ax.bar(range(len(stored)), stored, width=1.0, color="tab:blue")
    if stored:
        mean = sum(stored) / len(stored)
        ax.axhline(mean, color="grey", linestyle="--", label=f"mean {mean:.1f}")
        ax.legend(fontsize="small")
    ax.set_xlabel("processes, most entries first")
    ax.set_ylabel("entries stored over the run")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(figure, path)


def plot_histogram(values: Sequence[float], xlabel: str, title: str, path: Path) -> Path:
    """A plain histogram (batch sizes from the logs)."""
    figure = _figure()
    ax = figure.add_subplot()
    ax.hist(values, bins=min(50, max(1, len(set(values)))))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(figure, path)


def plot_events(rows: Sequence[Mapping[str, Any]], title: str, path: Path) -> Path:
    """Log events per time bin, one line per level (rows of :func:`.stats.event_timeline`)."""
    curves: dict[str, dict[float, int]] = defaultdict(dict)
    for r in rows:
        curves[str(r["level"])][float(r["start"])] = int(r["count"])
    t0 = min((x for c in curves.values() for x in c), default=0.0)
    figure = _figure()
    ax = figure.add_subplot()
    for level in sorted(curves):
        xs = sorted(curves[level])
        ax.step([x - t0 for x in xs], [curves[level][x] for x in xs], where="post", label=level)
    ax.set_xlabel("seconds since the first event")
    ax.set_ylabel("events")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _save(figure, path)
