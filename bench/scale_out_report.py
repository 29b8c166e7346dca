"""bench/scale_out.py's report: the table, issue 30's goals with their figures, the plot.

Everything here reads the rows as the JSON keeps them, so ``scale_out.py --replot FILE``
redraws a report from a run on another machine (one without matplotlib, say).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

Row = dict[str, Any]

COLUMNS = (
    "system", "daemons", "durable", "load", "ops/s", "cluster CPU µs/op", "client CPU µs/op",
    "cores busy", "p50 ms", "p99 ms", "vs Redis", "placement", "history",
)  # fmt: skip
MODE_NAMES = {"one": "one at a time", "batch": "batched"}


def find(
    rows: list[Row], system: str, mode: str, nodes: int = 1, durable: bool = False
) -> Row | None:
    """The measured row of that system, mode, size and durability (None: not run, or
    failed)."""
    for r in rows:
        if (r["system"], r["mode"], r["nodes"], r["durable"]) == (system, mode, nodes, durable):
            return r if r.get("error") is None else None
    return None


def vs_redis(rows: list[Row], r: Row) -> float | None:
    """A Skueue row's throughput over Redis' at the same load and durability."""
    redis = find(rows, "redis", r["mode"], 1, r["durable"])
    if r["system"] != "skueue" or redis is None or r.get("error"):
        return None
    return float(r["ops_per_second"] / redis["ops_per_second"])


def history_cell(r: Row) -> str:
    if r.get("error"):
        return f"FAILED: {r['error']}"
    h = r.get("history")
    if h is None:
        return "–"
    return f"{'ok' if h['linearizable'] else 'VIOLATION'} ({h['records']} records, {h['method']})"


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        if r.get("error"):
            cells = ["–"] * 8
        else:
            ratio = vs_redis(rows, r)
            cells = [
                f"{r['ops_per_second']:,.0f}",
                f"{r['cpu_us_per_op']:.1f}",
                f"{r['client_cpu_us_per_op']:.1f}",
                f"{r['cores_busy']:.2f}",
                f"{r['latency_ms']['p50']:.2f}",
                f"{r['latency_ms']['p99']:.2f}",
                "–" if ratio is None else f"{ratio:.2f}×",
                r["placement"],
            ]
        head = [r["system"], str(r["nodes"]), "yes" if r["durable"] else "no",
                MODE_NAMES[r["mode"]]]  # fmt: skip
        lines.append("| " + " | ".join([*head, *cells, history_cell(r)]) + " |")
    return "\n".join(lines)


# -- the goals ---------------------------------------------------------------------------


def goal(
    text: str,
    scope: str,
    figure: Callable[[], tuple[float, str] | None],
    test: Callable[[float], bool],
    missing: str,
) -> dict[str, Any]:
    """One goal: its figure (value and how it reads), met or not; "not measured" where a
    row it needs is absent."""
    got = figure()
    if got is None:
        return {"goal": text, "scope": scope, "figure": None, "met": None, "note": missing}
    value, shown = got
    return {"goal": text, "scope": scope, "figure": value, "shown": shown, "met": test(value)}


def ratio_of(a: Row | None, b: Row | None, key: str = "ops_per_second") -> float | None:
    return None if a is None or b is None or not b[key] else float(a[key] / b[key])


def goals(rows: list[Row]) -> list[dict[str, Any]]:
    """Issue 30's goals, each with the figure this run measured."""
    sk = lambda mode, n, durable=False: find(rows, "skueue", mode, n, durable)  # noqa: E731
    redis = lambda mode, durable=False: find(rows, "redis", mode, 1, durable)  # noqa: E731

    def times(a: Row | None, b: Row | None, key: str = "ops_per_second") -> Any:
        return lambda: None if (x := ratio_of(a, b, key)) is None else (x, f"{x:.2f}×")

    out = []
    for mode in ("one", "batch"):
        out.append(goal(
            f"8 daemons ≥ 5× 1 daemon, {MODE_NAMES[mode]}", "16 cores",
            times(sk(mode, 8), sk(mode, 1)), lambda x: x >= 5.0, "needs the 1 and 8 rows",
        ))  # fmt: skip
    out.append(goal(
        "12 daemons ≥ 1.0× Redis, one at a time", "16 cores",
        times(sk("one", 12), redis("one")), lambda x: x >= 1.0, "needs a 12-daemon row",
    ))  # fmt: skip
    out.append(goal(
        "12 daemons ≥ 0.5× Redis, batched", "16 cores",
        times(sk("batch", 12), redis("batch")), lambda x: x >= 0.5, "needs a 12-daemon row",
    ))  # fmt: skip
    one = sk("one", 1)
    out.append(goal(
        "1 daemon ≤ 30 µs cluster CPU/op, one at a time", "2 cores",
        lambda: None if one is None else (one["cpu_us_per_op"], f"{one['cpu_us_per_op']:.1f} µs"),
        lambda x: x <= 30.0, "needs the 1-daemon row",
    ))  # fmt: skip
    out.append(goal(
        "4 daemons ≤ 1.5× the 1-daemon cluster CPU/op, one at a time", "2 cores",
        times(sk("one", 4), one, "cpu_us_per_op"), lambda x: x <= 1.5, "needs the 1 and 4 rows",
    ))  # fmt: skip
    out.append(goal(
        "4 daemons ≥ 0.5× Redis, one at a time", "2 cores",
        times(sk("one", 4), redis("one")), lambda x: x >= 0.5, "needs a 4-daemon row",
    ))  # fmt: skip
    out.append(goal(
        "4 daemons ≥ 1.0× Redis, batched", "2 cores",
        times(sk("batch", 4), redis("batch")), lambda x: x >= 1.0, "needs a 4-daemon row",
    ))  # fmt: skip
    for mode in ("one", "batch"):
        mine = client_row(rows, mode)
        out.append(goal(
            f"Skueue's client CPU/op ≤ redis-py's, {MODE_NAMES[mode]}"
            + ("" if mine is None else f" ({mine['nodes']} daemons)"), "any",
            times(mine, redis(mode), "client_cpu_us_per_op"), lambda x: x <= 1.0,
            "needs a Skueue and a Redis row",
        ))  # fmt: skip
    for r in rows:
        if r["system"] == "skueue" and r["durable"]:
            out.append(goal(
                f"durable ≥ 1/1.3 of in-memory throughput, {r['nodes']} daemons, "
                f"{MODE_NAMES[r['mode']]}", "any",
                times(find(rows, "skueue", r["mode"], r["nodes"], True), sk(r["mode"], r["nodes"])),
                lambda x: x >= 1 / 1.3, "the row failed or has no in-memory twin",
            ))  # fmt: skip
    checked = [r for r in rows if r["system"] == "skueue"]
    bad = [r for r in checked if r.get("error") or not r["history"]["linearizable"]]
    good = len(checked) - len(bad)
    out.append({
        "goal": "every history linearizable", "scope": "any", "figure": good,
        "shown": f"{good} of {len(checked)} rows", "met": not bad and bool(checked),
    })  # fmt: skip
    return out


def client_row(rows: list[Row], mode: str) -> Row | None:
    """The Skueue row whose client cost is set against redis-py's: 4 daemons (the 2-core
    goal's row) where measured, else the largest in-memory cluster."""
    mine = [r for r in rows if r["system"] == "skueue" and r["mode"] == mode and not r["durable"]]
    mine = [r for r in mine if not r.get("error")]
    if not mine:
        return None
    return next((r for r in mine if r["nodes"] == 4), max(mine, key=lambda r: r["nodes"]))


def goal_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = []
    for g in results:
        if g["met"] is None:
            verdict = f"not measured ({g['note']})"
        else:
            verdict = f"{g['shown']}: {'met' if g['met'] else 'NOT met'}"
        lines.append(f"- [{g['scope']}] {g['goal']}: {verdict}")
    return lines


# -- the plot ----------------------------------------------------------------------------


def plot(report: dict[str, Any], path: Path) -> str:
    """Throughput and cluster CPU per operation against the number of daemons, one at a
    time and batched; Redis as horizontal lines.  Returns what it did, in a line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        later = path.with_suffix(".json")
        return f"plot skipped: no matplotlib here (draw it later: --replot {later})"
    from matplotlib.ticker import FuncFormatter, LogLocator

    # 20k rather than 2×10⁴; the minor ticks at 2 and 5 are labelled too, so that a short
    # span still reads.
    compact = FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}")
    rows = [r for r in report["rows"] if not r.get("error")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    colors = {"one": "tab:blue", "batch": "tab:orange"}
    core = ", 1 core" if report["layout"]["pinned"] else ""
    panels = (
        ("ops_per_second", "operations per second"),
        ("cpu_us_per_op", "cluster CPU µs per operation"),
    )
    nodes = sorted({r["nodes"] for r in rows if r["system"] == "skueue"})
    for ax, (key, label) in zip(axes, panels, strict=True):
        for mode, color in colors.items():
            for durable, style, marker in ((False, "-", "o"), (True, "none", "D")):
                mine = sorted(
                    (
                        r
                        for r in rows
                        if (r["system"], r["mode"], r["durable"]) == ("skueue", mode, durable)
                    ),
                    key=lambda r: r["nodes"],
                )
                if mine:
                    ax.plot(
                        [r["nodes"] for r in mine], [r[key] for r in mine], linestyle=style,
                        marker=marker, color=color, fillstyle="none" if durable else "full",
                        label=f"Skueue, {MODE_NAMES[mode]}" + (", durable" if durable else ""),
                    )  # fmt: skip
            for durable, style in ((False, "--"), (True, ":")):
                redis = find(rows, "redis", mode, 1, durable)
                if redis is not None:
                    aof = ", AOF always" if durable else ""
                    ax.axhline(
                        redis[key], linestyle=style, color=color, alpha=0.8,
                        label=f"Redis{core}, {MODE_NAMES[mode]}{aof}",
                    )  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xticks(nodes or [1], [str(n) for n in nodes or [1]])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(compact)
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(compact)
        ax.set_xlabel("daemons")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_title("throughput")
    axes[1].set_title("cluster CPU per operation")
    fig.suptitle(
        f"Skueue scale-out: {report['machine']}\n{report['layout']['summary']}", fontsize=10
    )
    # The legend below both panels, where it covers no data.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"plot: {path}"
