"""``report.md``: the analysis in a page of Markdown (collected numbers only)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from skueue.analysis.checks import HistoryCheck
from skueue.analysis.plots import rated_bins
from skueue.analysis.result import Analysis, fairness

_METHOD = {
    "certificate": "the anchor's `ord` certificate (a proof)",
    "exact": "exact search (small history)",
    "patterns": "violation patterns (a violation is a proof, a pass is not)",
}
UNDECIDED = ("nothing: the `ord` certificate fails, which proves nothing either way, and no "
             "violation pattern matched; the exact search would decide it, but the history "
             "is too large for it")
"""The "decided by" cell of an unproven verdict (see ``skueue.check.checker.unproven``)."""
_MODEL_NAMES = {"linearizable": "linearizable", "sc": "sequentially consistent"}


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _cell(c: object) -> str:
    if isinstance(c, float):
        return f"{c:,.0f}" if abs(c) >= 1000 else f"{c:.4g}"
    return str(c).replace("|", "\\|").replace("\n", " ")


def _verdict(c: HistoryCheck, model: str) -> str:
    v = c.verdicts[model]
    if not v.decided:
        return "unproven"
    return "yes" if v.ok else "**no**"


def _decided_by(c: HistoryCheck) -> str:
    """What decided each model: one text when both agree, else one per model."""
    texts = {m: _METHOD[v.method] if v.decided else UNDECIDED for m, v in c.verdicts.items()}
    if len(set(texts.values())) == 1:
        return texts["linearizable"]
    return "; ".join(f"{_MODEL_NAMES[m]}: {texts[m]}" for m in ("linearizable", "sc"))


def render(a: Analysis) -> str:
    o = a.options
    out = ["# Skueue analysis", ""]
    out += [
        f"Inputs: {', '.join(f'`{p}`' for p in o.paths)}; Spark master {a.master}.",
        f"{a.records} history records, "
        f"{sum(f['event'] for f in a.files.values())} log events, "
        f"**{a.malformed_lines} malformed line(s)** (counted, skipped).",
        "",
    ]
    out += _table(
        ["file", "records", "log events", "malformed"],
        [(f, c["record"], c["event"], c["malformed"]) for f, c in sorted(a.files.items())],
    )
    if a.malformed:
        out += ["", f"First malformed lines (of {a.malformed_lines}):", ""]
        out += _table(["file", "reason", "line"],
                      [(m["file"], m["reason"], f"`{m['text']}`") for m in a.malformed])
    out += _checks(a)
    out += _pei(a)
    out += _history_stats(a)
    out += _logs(a)
    out += _leases(a)
    out += ["", "## Tables and plots", ""]
    out += [f"- Parquet: `{t}`" for t in a.tables]
    out += [f"- ![{p.stem}]({p.name})" for p in a.plots]
    out += ["", "## Timings", ""]
    if a.shuffle_partitions:
        out += [f"Checks and statistics ran with {a.shuffle_partitions} shuffle partition(s) "
                f"(`spark.sql.shuffle.partitions`, sized from the input unless set).", ""]
    out += _table(["step", "seconds"], [(k, f"{v:.1f}") for k, v in a.seconds.items()])
    return "\n".join(out) + "\n"


def _checks(a: Analysis) -> list[str]:
    if not a.checks:
        return []
    out = ["", "## Consistency verdicts", ""]
    if a.options.drained:
        out += ["The run is taken to have drained: an element never removed is lost.", ""]
    rows: list[tuple[object, ...]] = []
    for c in a.checks:
        if c.problem is not None:
            rows.append((c.label, c.records, c.structure or "-", "-", "-", "-",
                         f"not checkable: {c.problem}"))
            continue
        rows.append((
            c.label, c.records, _structure(c), "yes" if c.certified else "no",
            _verdict(c, "linearizable"), _verdict(c, "sc"), _decided_by(c),
        ))
    out += _table(["history", "records", "structure", "ord on every record", "linearizable",
                   "sequentially consistent", "decided by"], rows)
    for c in a.checks:
        for model, v in c.verdicts.items():
            if not v.ok:
                head = "" if v.decided else "unproven: "
                out += ["", f"- {c.label}, {model}: {head}{v.reason}"]
    for c in a.checks:
        if c.problem is not None:
            continue
        out += ["", f"### Distributed checks: {c.label}", ""]
        fams = ["certificate"] if c.certified else []
        fams.append("patterns")
        for fam in fams:
            verdict = "; ".join(
                f"{m}: {'no violation' if c.first(fam, m) is None else 'VIOLATION'}"
                for m in ("linearizable", "sc")
            )
            out.append(f"- {fam}: {verdict}")
        if c.findings:
            out += [""] + _table(
                ["family", "check", "breaks", "count", "first example"],
                [(f.family, f.check, "both models" if f.scope == "sc" else "linearizability",
                  f.count, f.example) for f in c.findings],
            )
    return out


def _pei(a: Analysis) -> list[str]:
    rows = [r for r in a.pei if r["count"] or r["note"]]
    if not rows:
        return []
    out = ["", "## Popped element index (PEI)", "",
           "For every dequeue that returned an element: how many elements present at that "
           "moment came before it in priority order (the most urgent level first, FIFO "
           "within a level). Seed 000's measure; a perfect priority queue scores 0 on every "
           "dequeue, and so must Skueue. *Exact at ord*: at the dequeue's `ord` (every "
           "record of the queue has one). *Observed lower bound*: what every linearization "
           "must give, from real time alone (the records lack `ord`), so anything above 0 "
           "is a proven inversion.", ""]
    out += _table(
        ["history", "queue", "levels", "dequeues", "measure", "median", "mean", "p90", "p99",
         "max"],
        [(r["name"], r["queue"] or "default",
          len(r["levels"]) or 1, r["count"], r["method"] or r["note"],
          *[_stat(r[k]) for k in ("median", "mean", "p90", "p99")], r["max"])
         for r in rows],
    )
    return out


def _stat(x: float) -> str:
    return "-" if x != x else f"{x:.4g}"  # NaN: no dequeue returned an element


def _structure(c: HistoryCheck) -> str:
    if not c.levels:
        return str(c.structure)
    return f"{c.structure}, priority levels {', '.join(map(str, c.levels))}"


def _history_stats(a: Analysis) -> list[str]:
    out: list[str] = []
    for hid, s in sorted(a.summaries.items()):
        name = next((c.name for c in a.checks if c.hid == hid), str(hid))
        ops = ", ".join(f"{n} {op}" for op, n in s.by_op.items())
        rate = s.records / s.span if s.span > 0 else float("nan")
        unit1 = s.unit[:-1]
        out += ["", f"## Statistics: {name}", "",
                f"{s.records} operations ({ops}; {s.empty} found the structure empty) by "
                f"{s.processes} processes over {_cell(s.span)} {s.unit}: "
                f"{_cell(rate)} operations per {unit1} on average.", ""]
        if s.drain:
            out += [f"The {s.drain} records of the final drain (`phase: drain`) are left out "
                    "of these statistics and plots; the consistency checks include them.", ""]
        scale, shown = (1000.0, "ms") if s.unit == "seconds" else (1.0, s.unit)
        lat = sorted(a.latency.get(hid, []), key=lambda r: (r["kind"] == "all", r["kind"]))
        out += [f"Latency (response - invoke, {shown}; percentiles approximate to 0.001%):", ""]
        out += _table(["kind", "count", "mean", "p50", "p90", "p99", "max"], [
            (r["kind"], r["count"], *[float(r[k]) * scale for k in ("mean", "p50", "p90", "p99",
                                                                      "max")])
            for r in lat
        ])
        bins = rated_bins(a.throughput.get(hid, []))
        peak = max(bins, key=lambda b: (float(b["rate"]), str(b["kind"])), default=None)
        if peak is not None:
            width = float(peak["width"])
            out += ["", f"Throughput over time: `throughput` table and plot, bins of "
                        f"{width:g} {s.unit}. The busiest bin of one op kind: {peak['kind']} "
                        f"at {float(peak['rate']):.4g} completions per {unit1}, "
                        f"{_cell(float(peak['start']) - s.start)}-"
                        f"{_cell(float(peak['start']) - s.start + width)} {s.unit} in."]
        out += _storage(a, hid)
    return out


def _storage(a: Analysis, hid: int) -> list[str]:
    rows = a.storage.get(hid, [])
    if hid in a.storage_missing:
        return ["", "No entries stored per process (DHT fairness, paper Corollary 19): this "
                "history's processes are clients, not the daemons whose DHT stores the "
                "elements. Pass the daemons' process ids (`--members ID,...`) or their JSON "
                "logs (`skueued --log-format json`) with the history."]
    if not rows:
        return []
    f = fairness(rows)
    removed = sum(int(r["stored"]) - int(r["held"]) for r in rows)
    out = ["", f"Entries stored per process (DHT fairness, paper Corollary 19), over "
               f"{len(rows)} process(es) from {a.members_source}:", ""]
    out += _table(["min", "mean", "max", "max / mean", "coefficient of variation"],
                  [(f["min"], f["mean"], f["max"],
                    f["max"] / f["mean"] if f["mean"] else float("nan"), f["cv"])])
    out += ["", f"({removed} of the stored entries were removed by the end of the history.)"]
    return out


def _logs(a: Analysis) -> list[str]:
    if not a.event_counts:
        return []
    out = ["", "## Daemon logs", ""]
    counts: dict[tuple[str, str], int] = {}
    for r in a.event_counts:
        key = (str(r["level"]), str(r["event"]))
        counts[key] = counts.get(key, 0) + int(r["count"])
    daemons = sorted({str(r["daemon"]) for r in a.event_counts if r["daemon"]})
    if daemons:
        out += [f"Daemons (from their `ready` events): {', '.join(daemons)}.", ""]
    out += _table(["level", "event", "count"],
                  [(lv, ev, n) for (lv, ev), n in sorted(counts.items(), key=lambda kv: -kv[1])])
    out += [""]
    if a.batches:
        out += ["Batch sizes (operations per batch sent up the aggregation tree, from the "
                "daemons' debug-level `batch up` events), per virtual node:", ""]
        out += _table(["node", "batches", "empty", "mean", "p50", "p90", "p99", "max"],
                      [_batch_row(r) for r in a.batches])
    else:
        out += ["No batch sizes in the logs: the daemons log one `batch up` event per batch "
                "at debug level (`skueued --log-level debug --log-format json`)."]
    return out


def _leases(a: Analysis) -> list[str]:
    s = a.leases
    if s is None:
        return []
    out = ["", "## Leases", ""]
    out += _table(["event", "count"], sorted(s["events"].items()))
    acks = s["acks"]
    out += ["", f"Acks answered: {acks['acked']} acked, {acks['late']} late (the lease had "
            f"ended: the element came again), {acks['unanswered']} never (the consumer died "
            "first).", ""]
    out += ["Elements by their highest delivery count (2 or more: delivered again):", ""]
    out += _table(["deliveries", "elements"],
                  [(r["deliveries"], r["elements"]) for r in s["elements_by_deliveries"]])
    lat = s["latency_ms"]
    if lat:
        out += ["", f"Lease latency, delivery to ack or nack ({lat['n']} leases): p50 "
                f"{lat['p50']:g} ms, p90 {lat['p90']:g} ms, p99 {lat['p99']:g} ms."]
    if s["problem_count"]:
        out += ["", f"**{s['problem_count']} lease problem(s)** (acked twice, leased twice "
                "at once, or delivery counts that do not rise); the first:", ""]
        out += [f"- {p}" for p in s["problems"]]
    else:
        out += ["", "No lease problem: no element acked twice, none leased twice at once, "
                "delivery counts rise."]
    return out


def _batch_row(r: dict[str, Any]) -> tuple[object, ...]:
    return (r["node"], r["count"], r["empty"],
            *[float(r[k]) for k in ("mean", "p50", "p90", "p99", "max")])
