"""PNG plots of seed 000's Figures 2-7 with Skueue's priority queue on the same axes,
from :mod:`skueue.sim.pei_sweep` rows (straight from a run or back from a CSV).

Needs matplotlib (the ``spark`` extra), drawn on a bare Agg :class:`Figure` as
:mod:`skueue.sim.figures` does, for the same reasons.

Every figure has the PEI on top and Skueue's cost below: its mean rounds per request
(SPEC §9), next to the seed's pop, which takes two round trips (the k peeks in parallel,
then the pop) whatever n is.  The PEI axis is "symlog": linear from 0 to 1 and
logarithmic above, so that Skueue's line at exactly 0 shows beside values in the
thousands.  Several seeds of one point are averaged.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from skueue.sim.pei_sweep import LEVELS, SECOND_CHOICE
from skueue.sim.sweep import number

DPI = 100
STATS = ("median", "mean", "p90", "p99")
_STAT_STYLE = {
    "median": ("--", "o"),
    "mean": ("-", "s"),
    "p90": ("-.", "^"),
    "p99": (":", "v"),
}
_STRATEGY_COLOR = {
    "peek-before-pop": "tab:blue",
    "peek-before-add": "tab:orange",
    "no-peek": "tab:purple",
}
_STAT_COLOR = {"median": "tab:blue", "mean": "tab:orange", "p90": "tab:green", "p99": "tab:purple"}
SKUEUE_COLOR = "tab:red"
SKUEUE_LABEL = f"Skueue, {LEVELS} levels: PEI 0 at every pop"
RELAXED_ROUNDS = 4
"""The seed's pop in the synchronous model: peeks out, heads back, pop out, element back."""

Rows = Sequence[Mapping[str, object]]


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path | str) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png")
    return out


def curve(rows: Iterable[Mapping[str, object]], x: str, y: str) -> dict[float, float]:
    """``{x: mean of y over seeds}``, sorted by x."""
    cells: dict[float, list[float]] = defaultdict(list)
    for row in rows:
        cells[number(row, x)].append(number(row, y))
    return {k: statistics.fmean(v) for k, v in sorted(cells.items())}


def _select(rows: Rows, **match: object) -> list[Mapping[str, object]]:
    return [r for r in rows if all(str(r[k]) == str(v) for k, v in match.items())]


def _pei_axis(ax: Axes, xlabel: str) -> None:
    ax.set_yscale("symlog", linthresh=1.0, linscale=0.5)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel("PEI (symlog: linear below 1)")
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)


def _log_x(ax: Axes, xs: Iterable[float]) -> None:
    ticks = sorted(set(xs))
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ticks, [f"{int(t):,}" for t in ticks])
    ax.tick_params(axis="x", labelrotation=45 if len(ticks) > 6 else 0, labelsize="small")


def _skueue_zero(ax: Axes, xs: Sequence[float], across: bool = False) -> None:
    """Skueue's measured PEI, 0: a thick line through its points (or across the axis)."""
    if across:
        ax.axhline(0, color=SKUEUE_COLOR, linewidth=3, label=SKUEUE_LABEL, zorder=5)
        return
    ax.plot(
        xs,
        [0] * len(xs),
        color=SKUEUE_COLOR,
        linewidth=3,
        marker="D",
        markersize=7,
        label=SKUEUE_LABEL,
        zorder=5,
        clip_on=False,
    )


def _rounds_panel(ax: Axes, rows: Rows, x: str, xlabel: str, across: bool = False) -> None:
    """Skueue's mean rounds per request, beside the seed's constant two round trips."""
    rounds = curve(rows, x, "mean_rounds")
    if across:
        value = next(iter(rounds.values()))
        ax.axhline(
            value,
            color=SKUEUE_COLOR,
            linewidth=2,
            label=f"Skueue, n = {int(number(rows[0], 'n'))}: {value:.0f} rounds per request",
        )
    else:
        ax.plot(
            list(rounds),
            list(rounds.values()),
            color=SKUEUE_COLOR,
            marker="D",
            label="Skueue: mean rounds per request",
        )
    ax.axhline(
        RELAXED_ROUNDS,
        color="grey",
        linestyle="--",
        label=f"seed 000's pop: 2 round trips ({RELAXED_ROUNDS} rounds), any n",
    )
    top = max([*rounds.values(), RELAXED_ROUNDS])
    ax.set_ylim(0, top * 1.3)
    ax.set_ylabel("rounds per request")
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")


def _stat_curves(ax: Axes, rows: Rows, x: str, stats: Sequence[str] = STATS) -> None:
    for stat in stats:
        c = curve(rows, x, stat)
        line, marker = _STAT_STYLE[stat]
        ax.plot(
            list(c),
            list(c.values()),
            linestyle=line,
            marker=marker,
            markersize=5,
            markerfacecolor="none",
            color=_STAT_COLOR[stat],
            label=f"relaxed: {stat}",
        )


def _two_rows(width: float, columns: int = 1) -> tuple[Figure, list[Axes], Axes]:
    figure = _figure(width, 7.0)
    grid = figure.add_gridspec(2, columns, height_ratios=(3, 1.3))
    top = [figure.add_subplot(grid[0, i]) for i in range(columns)]
    for ax in top[1:]:
        ax.sharey(top[0])
    bottom = figure.add_subplot(grid[1, :])
    return figure, top, bottom


def _finish(figure: Figure, top: Sequence[Axes], title: str, ncol: int) -> None:
    """Title, one legend for the PEI panels under it (clear of every curve), and the
    PEI axis from just below 0, so that Skueue's line shows whole."""
    handles, labels = top[0].get_legend_handles_labels()
    height = figure.get_figheight()
    legend_rows = -(-len(labels) // ncol)
    title_at = 1 - 0.1 / height
    legend_at = title_at - 0.3 / height
    figure.suptitle(title, fontsize="medium", y=title_at, va="top")
    figure.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, legend_at),
        ncol=ncol,
        fontsize="small",
        frameon=False,
    )
    figure.tight_layout(rect=(0, 0, 1, legend_at - 0.16 * legend_rows / height))
    for ax in top:
        ax.set_ylim(bottom=-0.15)


# -- the figures -------------------------------------------------------------------------


def plot_distribution(counts: Sequence[tuple[int, int]], path: Path | str, title: str) -> Path:
    """Figure 2: the fraction of pops at each PEI, and Skueue's (all at 0)."""
    total = sum(n for _, n in counts)
    cut = _quantile_index(counts, 0.995)
    shown = [(i, n / total) for i, n in counts if i <= cut]
    figure = _figure(8.0, 4.5)
    ax = figure.add_subplot()
    ax.bar(
        [i for i, _ in shown],
        [f for _, f in shown],
        width=1.0,
        color="tab:blue",
        label="relaxed: fraction of pops",
    )
    ax.bar(
        [0],
        [1.0],
        width=1.0,
        color=SKUEUE_COLOR,
        alpha=0.35,
        label=f"Skueue, {LEVELS} levels: every pop at index 0 (fraction 1)",
    )
    ax.set_yscale("log")
    ax.set_ylim(min(f for _, f in shown) / 2, 1.5)
    ax.set_xlim(-1.5, cut + 1)
    ax.set_xlabel(f"popped element index (PEI); pops above {cut} (0.5%) not shown")
    ax.set_ylabel("fraction of pops (log scale)")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    figure.tight_layout()
    return _save(figure, path)


def _quantile_index(counts: Sequence[tuple[int, int]], q: float) -> int:
    total = sum(n for _, n in counts)
    seen = 0
    for i, n in counts:
        seen += n
        if seen >= q * total:
            return i
    return counts[-1][0] if counts else 0


def plot_pei_vs_lag(rows: Rows, path: Path | str) -> Path:
    """Figure 3: median and mean PEI against the consumer lag for the three strategies,
    with the seed's protocol (left) and in the steady state (right)."""
    relaxed = _select(rows, figure="lag", design="relaxed")
    skueue = _select(rows, figure="lag", design="skueue")
    first = _select(relaxed, strategy="peek-before-pop")[0]
    n, k, pops = (int(number(first, f)) for f in ("n", "k", "pops"))
    figure, (left, right), bottom = _two_rows(12.0, 2)
    lags = sorted({number(r, "lag") for r in relaxed})
    for ax, steady in ((left, False), (right, True)):
        for strategy, color in _STRATEGY_COLOR.items():
            mine = [
                r
                for r in relaxed
                if r["strategy"] == strategy and (number(r, "warmup") > 0) == steady
            ]
            for stat in ("mean", "median"):
                c = curve(mine, "lag", stat)
                line, marker = _STAT_STYLE[stat]
                ax.plot(
                    list(c),
                    list(c.values()),
                    linestyle=line,
                    marker=marker,
                    markerfacecolor="none",
                    color=color,
                    label=f"relaxed, {strategy}: {stat}",
                )
        _skueue_zero(ax, [number(r, "lag") for r in skueue])
        _pei_axis(ax, "consumer lag L (log scale)")
        _log_x(ax, lags)
    left.set_title(f"the seed's protocol: fill L, then measure {pops:,} pops", fontsize="medium")
    right.set_title("steady state: L unmeasured pops first", fontsize="medium")
    _rounds_panel(bottom, skueue, "lag", f"Skueue, n = {n} processes: prefilled elements")
    _log_x(bottom, [number(r, "lag") for r in skueue])
    _finish(
        figure,
        (left, right),
        f"PEI vs consumer lag: relaxed design with n = {n} subqueues, k = {k} peeks (no peek: "
        f"1), one client; Skueue with n = {n} processes (seed 000, Figure 3)",
        ncol=4,
    )
    return _save(figure, path)


def plot_pei_vs_n(rows: Rows, path: Path | str) -> Path:
    """Figure 4: PEI against the number of subqueues at fixed k (equation 1)."""
    relaxed = _select(rows, figure="n", design="relaxed")
    skueue = _select(rows, figure="n", design="skueue")
    figure, (top,), bottom = _two_rows(8.0)
    _stat_curves(top, relaxed, "n")
    _skueue_zero(top, [number(r, "n") for r in skueue])
    _pei_axis(top, "n: subqueues (relaxed) / processes (Skueue)")
    ks = sorted({int(number(r, "k")) for r in relaxed})
    lag = int(number(relaxed[0], "lag"))
    _rounds_panel(bottom, skueue, "n", "n: subqueues (relaxed) / processes (Skueue)")
    _finish(
        figure,
        (top,),
        f"PEI vs n: k = {', '.join(map(str, ks))} peeks, lag {lag:,}, one client "
        "(seed 000, Figure 4)",
        ncol=3,
    )
    return _save(figure, path)


def plot_pei_vs_k(rows: Rows, path: Path | str) -> Path:
    """Figure 5: PEI against the number of peeks at fixed n."""
    relaxed = _select(rows, figure="k", design="relaxed")
    skueue = _select(rows, figure="k", design="skueue")
    figure, (top,), bottom = _two_rows(8.0)
    _stat_curves(top, relaxed, "k")
    _skueue_zero(top, [], across=True)
    _pei_axis(top, "peeks k (log scale)")
    _log_x(top, [number(r, "k") for r in relaxed])
    n = int(number(relaxed[0], "n"))
    lag = int(number(relaxed[0], "lag"))
    _rounds_panel(bottom, skueue, "n", "Skueue has no k: one dequeue, no peeks", across=True)
    bottom.set_xticks([])
    _finish(
        figure,
        (top,),
        f"PEI vs peeks k: n = {n}, lag {lag:,}, one client (seed 000, Figure 5)",
        ncol=3,
    )
    return _save(figure, path)


def plot_pei_vs_clients(rows: Rows, path: Path | str) -> Path:
    """Figures 6 and 7: p50/mean/p90/p99 against concurrent clients, with the basic
    policy (left) and the second choice (right)."""
    relaxed = _select(rows, figure="clients", design="relaxed")
    skueue = _select(rows, figure="clients", design="skueue")
    figure, (left, right), bottom = _two_rows(12.0, 2)
    clients = [number(r, "clients") for r in relaxed]
    for ax, second in ((left, False), (right, True)):
        mine = [r for r in relaxed if str(r["strategy"]).endswith(SECOND_CHOICE) == second]
        _stat_curves(ax, mine, "clients")
        _skueue_zero(ax, [number(r, "clients") for r in skueue])
        _pei_axis(ax, "concurrent clients c (log scale)")
        _log_x(ax, clients)
    left.set_title("basic policy: pop the best head peeked (Figure 6)", fontsize="medium")
    right.set_title("second choice if that head changed (Figure 7)", fontsize="medium")
    n, k = int(number(relaxed[0], "n")), int(number(relaxed[0], "k"))
    lag = int(number(relaxed[0], "lag"))
    _rounds_panel(
        bottom, skueue, "clients", f"Skueue, n = {n} processes: c new requests every round"
    )
    _log_x(bottom, [number(r, "clients") for r in skueue])
    _finish(
        figure,
        (left, right),
        f"PEI vs concurrent clients: relaxed design with n = {n} subqueues, k = {k} peeks, "
        f"lag {lag:,}; Skueue with n = {n} processes (seed 000, Figures 6 and 7)",
        ncol=5,
    )
    return _save(figure, path)
