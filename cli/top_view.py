"""What ``skueue top`` shows: a pure function of two consecutive stats answers.

A stats answer (the client protocol's stats request, as ``skueue stats`` sends it) holds
every member's counters; the view shows the *difference* between two answers divided by
the seconds between them, so a rate is what happened in the last interval, not an
average over the daemon's life.  Where a figure cannot be had (the first answer, a member
that was not in the previous one, a counter that went backwards because the member
restarted without its data), the view shows ``-`` rather than a made-up number.

Nothing here reads a clock, a socket or the terminal: :func:`render` takes the two
answers with the times they came (:class:`Snapshot`) and returns rich renderables, so the
tests check the figures and the text without a daemon.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

MEMBER_COUNTS = ("inserted", "removed", "empty")
"""A member's operation counters (its clients' operations, whatever the queue)."""
LEASE_COUNTS = ("leased", "acked", "returned")
"""Lease events, added up over a member's per-queue statistics (returned: nacked or
expired, back in the queue for another consumer)."""
MEMBER_COLUMNS = (
    ("ins/s", "inserted"),
    ("rem/s", "removed"),
    ("empty/s", "empty"),
    ("lease/s", "leased"),
    ("ack/s", "acked"),
    ("ret/s", "returned"),
)

STATE_WIDTH_MAX = 17
TABLE_WIDTH_MAX = 1000
DROP_FIRST = ("ret/s", "ack/s", "lease/s", "pending", "empty/s", "leases", "state")
"""The members' columns a narrow terminal goes without, first to last."""


@attrs.frozen
class Snapshot:
    """One stats answer and when it came: ``at`` on a monotonic clock (for rates),
    ``wall`` as Unix time (for the header)."""

    at: float
    wall: float
    stats: Mapping[str, Any]


@attrs.frozen
class MemberRow:
    process: str
    anchor: bool
    answered: bool
    state: str  # "ready", why not, or "no answer"
    rates: dict[str, float | None]  # MEMBER_COLUMNS' keys; None: unknown
    pending: int | None
    entries: int | None
    leases: int | None
    cpu_percent: float | None
    rss_bytes: int | None
    down: dict[str, float]  # peers this member's links find down, seconds since
    silent_s: float | None = None  # no answer: seconds the asked daemon's link is down


@attrs.frozen
class QueueRow:
    name: str
    structure: str
    depth: int | None  # None: the anchor did not answer
    insert_rate: float | None
    remove_rate: float | None
    inserted: int
    removed: int


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def member_counts(member: Mapping[str, Any]) -> dict[str, int]:
    """A member's operation and lease counters, by MEMBER_COLUMNS' keys."""
    out = {name: _int(member.get(name)) or 0 for name in MEMBER_COUNTS}
    queues = member.get("queue_stats")
    per_queue = [
        q for q in (queues.values() if isinstance(queues, dict) else []) if isinstance(q, dict)
    ]
    for name in LEASE_COUNTS:
        parts = ("nacked", "expired") if name == "returned" else (name,)
        out[name] = sum(_int(q.get(part)) or 0 for q in per_queue for part in parts)
    return out


def per_second(
    before: Mapping[str, int] | None, after: Mapping[str, int], seconds: float
) -> dict[str, float | None]:
    """``(after - before) / seconds`` per key; None where it cannot be told (no earlier
    figure, no time between, or a counter that went backwards: a restart)."""
    out: dict[str, float | None] = {}
    for key, value in after.items():
        earlier = None if before is None else before.get(key)
        if earlier is None or seconds <= 0 or value < earlier:
            out[key] = None
        else:
            out[key] = (value - earlier) / seconds
    return out


def _members(stats: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    members = stats.get("members")
    return {
        str(m.get("process")): m
        for m in (members if isinstance(members, list) else [])
        if isinstance(m, dict)
    }


def member_rows(prev: Snapshot | None, cur: Snapshot) -> list[MemberRow]:
    """One row per member that answered, then one per member that did not."""
    seconds = cur.at - prev.at if prev is not None else 0.0
    before = _members(prev.stats) if prev is not None else {}
    rows = []
    for process, m in sorted(_members(cur.stats).items()):
        earlier = before.get(process)
        rates = per_second(
            member_counts(earlier) if earlier is not None else None, member_counts(m), seconds
        )
        cpu, cpu_before = _number(m.get("cpu_seconds")), None
        if earlier is not None:
            cpu_before = _number(earlier.get("cpu_seconds"))
        cpu_percent = None
        if cpu is not None and cpu_before is not None and seconds > 0 and cpu >= cpu_before:
            cpu_percent = 100.0 * (cpu - cpu_before) / seconds
        down = m.get("peers_down")
        rows.append(
            MemberRow(
                process=process,
                anchor=bool(m.get("anchor")),
                answered=True,
                state=short_state(m),
                rates=rates,
                pending=_int(m.get("pending_ops")),
                entries=_int(m.get("entries")),
                leases=_int(m.get("leases_held")),
                cpu_percent=cpu_percent,
                rss_bytes=_int(m.get("rss_bytes")),
                down=dict(down) if isinstance(down, dict) else {},
            )
        )
    silent = cur.stats.get("unreachable")
    down_since = cur.stats.get("down")
    if not isinstance(down_since, dict):
        down_since = {}
    for process in silent if isinstance(silent, list) else []:
        since = down_since.get(process)
        rows.append(
            MemberRow(
                process=str(process),
                anchor=False,
                answered=False,
                state="no answer",
                rates=dict.fromkeys((k for _, k in MEMBER_COLUMNS), None),
                pending=None,
                entries=None,
                leases=None,
                cpu_percent=None,
                rss_bytes=None,
                down={},
                silent_s=_number(since),
            )
        )
    return rows


def short_state(member: Mapping[str, Any]) -> str:
    """``ready``, or the first words of why not (the links column names the peers)."""
    if member.get("ready") is True:
        return "ready"
    reason = str(member.get("ready_reason") or "not ready")
    return reason.split(":", 1)[0]


def queue_rows(prev: Snapshot | None, cur: Snapshot) -> list[QueueRow]:
    """One row per queue the cluster knows, with its depth (from the anchor) and its
    insert and remove rates over the last interval (added up over the members)."""
    seconds = cur.at - prev.at if prev is not None else 0.0
    queues = cur.stats.get("queues")
    earlier = prev.stats.get("queues") if prev is not None else None
    rows = []
    for name, q in sorted((queues if isinstance(queues, dict) else {}).items()):
        if not isinstance(q, dict):
            continue
        counts = {"inserted": _int(q.get("inserted")) or 0, "removed": _int(q.get("removed")) or 0}
        old = earlier.get(name) if isinstance(earlier, dict) else None
        before = {k: _int(old.get(k)) or 0 for k in counts} if isinstance(old, dict) else None
        rates = per_second(before, counts, seconds)
        rows.append(
            QueueRow(
                name=str(name),
                structure=str(q.get("structure") or "?"),
                depth=_int(q.get("size")),
                insert_rate=rates["inserted"],
                remove_rate=rates["removed"],
                inserted=counts["inserted"],
                removed=counts["removed"],
            )
        )
    return rows


def rate_text(rate: float | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.0f}" if rate >= 9.95 or rate == 0 else f"{rate:.1f}"  # 9.96: "10"


def count_text(value: int | None) -> str:
    return "-" if value is None else str(value)


def bytes_text(value: int | None) -> str:
    if value is None:
        return "-"
    mib = value / (1024 * 1024)
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def links_text(row: MemberRow) -> Text:
    if not row.answered:
        if row.silent_s is None:
            return Text("?", style="dim")
        return Text(f"down {row.silent_s:.0f} s", style="bold red")
    if not row.down:
        return Text("up", style="green")
    return Text(
        "down: " + ", ".join(f"{p} ({s:.0f} s)" for p, s in sorted(row.down.items())),
        style="bold red",
    )


@attrs.frozen
class Column:
    header: str
    cells: list[RenderableType]  # one per row
    total: RenderableType  # in the totals row
    numeric: bool = True


def member_columns(rows: list[MemberRow]) -> list[Column]:
    answered = [r for r in rows if r.answered]

    def total(values: list[float | None] | list[int | None], fmt: Callable[[Any], str]) -> str:
        return fmt(None if None in values else sum(v for v in values if v is not None))

    names = [
        Text(r.process + (" *" if r.anchor else ""), style="" if r.answered else "red")
        for r in rows
    ]
    states = []
    for r in rows:
        state = Text(r.state, style="green" if r.state == "ready" else "yellow")
        if not r.answered:
            state.stylize("bold red")
        states.append(state)
    columns = [
        Column("member", list(names), Text("total", style="bold"), numeric=False),
        Column("state", list(states), "", numeric=False),
    ]
    for header, key in MEMBER_COLUMNS:
        columns.append(
            Column(
                header,
                [rate_text(r.rates.get(key)) for r in rows],
                total([r.rates.get(key) for r in answered], rate_text),
            )
        )
    for header, field in (("pending", "pending"), ("entries", "entries"), ("leases", "leases")):
        values = [getattr(r, field) for r in rows]
        columns.append(
            Column(
                header,
                [count_text(v) for v in values],
                total([getattr(r, field) for r in answered], count_text),
            )
        )
    cpu = ["-" if r.cpu_percent is None else f"{r.cpu_percent:.0f}%" for r in rows]
    columns.append(Column("cpu", list(cpu), ""))
    columns.append(Column("rss", [bytes_text(r.rss_bytes) for r in rows], ""))
    columns.append(Column("links", [links_text(r) for r in rows], "", numeric=False))
    return columns


def members_table(rows: list[MemberRow], width: int | None = None) -> Table:
    """The members' table; ``width`` (the terminal's) drops the columns of least use
    (DROP_FIRST, in order) until the table fits, rather than squeezing every one."""
    columns = member_columns(rows)
    table = _members_table(columns, totals=sum(r.answered for r in rows) > 1)
    for header in DROP_FIRST:
        if width is None or table_width(table) <= width:
            break
        columns = [c for c in columns if c.header != header]
        table = _members_table(columns, totals=sum(r.answered for r in rows) > 1)
    return table


def _members_table(columns: list[Column], totals: bool) -> Table:
    table = Table(title="members", title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True)
    for c in columns:
        if c.header == "state":
            table.add_column(c.header, no_wrap=True, max_width=STATE_WIDTH_MAX)
        elif c.numeric:
            table.add_column(c.header, justify="right", no_wrap=True)
        else:
            table.add_column(c.header, no_wrap=c.header == "member")
    for i in range(len(columns[0].cells)):
        table.add_row(*(c.cells[i] for c in columns))
    if totals:
        table.add_section()
        table.add_row(*(c.total for c in columns))
    return table


def table_width(table: Table) -> int:
    """The columns the table takes when nothing is squeezed."""
    console = Console(file=io.StringIO(), width=TABLE_WIDTH_MAX)
    return Measurement.get(console, console.options, table).maximum


def queues_table(rows: list[QueueRow]) -> Table:
    table = Table(title="queues", title_justify="left", box=box.SIMPLE_HEAD, collapse_padding=True)
    table.add_column("queue", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    for header in ("depth", "ins/s", "rem/s", "inserted", "removed"):
        table.add_column(header, justify="right", no_wrap=True)
    for q in rows:
        table.add_row(
            q.name,
            q.structure,
            Text("?", style="yellow") if q.depth is None else str(q.depth),
            rate_text(q.insert_rate),
            rate_text(q.remove_rate),
            str(q.inserted),
            str(q.removed),
        )
    return table


def lines_of(renderable: RenderableType, width: int | None) -> int:
    """The lines ``renderable`` takes at ``width`` columns."""
    console = Console(file=io.StringIO(), width=width or TABLE_WIDTH_MAX)
    return len(console.render_lines(renderable, console.options, pad=False))


def queues_that_fit(
    rows: list[QueueRow], room: int | None, width: int | None
) -> list[RenderableType]:
    """The queues' table in ``room`` lines (None: no limit): as many rows as fit, in
    order, and a last line that says how many more there are and what waits in them, so
    that a short terminal does not hide a queue without a word."""
    if room is None or lines_of(queues_table(rows), width) <= room:
        return [queues_table(rows)]
    fit = max(0, room - 1 - lines_of(queues_table([]), width))  # 1: the "more" line
    shown, hidden = rows[:fit], rows[fit:]
    more = f"… {len(hidden)} more queue{'s' if len(hidden) != 1 else ''}"
    if not shown:
        more = f"… {len(hidden)} queue{'s' if len(hidden) != 1 else ''} (no room to list)"
    depths = [q.depth for q in hidden]
    if None not in depths:
        more += f", {sum(d for d in depths if d is not None)} waiting in them"
    line = Text(more, style="yellow", no_wrap=True, overflow="ellipsis")  # one line
    return [*([queues_table(shown)] if shown else []), line]


def partial_note(missing: Any, lacking: str) -> str | None:
    """The line that marks figures as partial (issue 28, item 7): the members that did
    not answer, whose own figures ``lacking`` lack; None when every member answered.
    (``skueue stats`` says it the same way.)"""
    if not isinstance(missing, list) or not missing:
        return None
    return f"partial: no answer from {', '.join(map(str, missing))}; {lacking} lack theirs"


def header(node: str, cur: Snapshot | None, interval_s: float) -> Text:
    text = Text("skueue top", style="bold")
    text.append(f"  via {node}")
    if cur is not None:
        members = cur.stats.get("processes")
        text.append(f"  {members} members" if members is not None else "")
        anchor = cur.stats.get("anchor")
        text.append(f"  anchor {anchor}" if anchor else "  anchor unknown")
        text.append(f"  at {time.strftime('%H:%M:%S', time.localtime(cur.wall))}")
    text.append(f"  every {interval_s:g} s", style="dim")
    return text


def render(
    node: str,
    prev: Snapshot | None,
    cur: Snapshot | None,
    *,
    interval_s: float = 1.0,
    problem: str | None = None,
    width: int | None = None,
    height: int | None = None,
) -> RenderableType:
    """The whole view: a header line, the members, the queues; ``problem`` (the node
    could not be asked) is shown above the last answer, which is kept; ``width``: the
    terminal's columns, which a narrow one fits by leaving some columns out; ``height``:
    its lines, which a short one fits by listing fewer queues and saying how many more
    there are (None: every queue)."""
    parts: list[RenderableType] = [header(node, cur, interval_s)]
    if problem is not None:
        parts.append(Text(f"unreachable: {problem} (trying again every {interval_s:g} s)",
                          style="bold red"))  # fmt: skip
    if cur is None:
        if problem is None:
            parts.append(Text("waiting for the first answer...", style="dim"))
        return Group(*parts)
    if problem is not None:
        parts.append(Text("last answer below:", style="dim"))
    partial = partial_note(cur.stats.get("unreachable"), "the totals, rates and queue counts")
    if partial is not None:
        parts.append(Text(partial, style="bold yellow"))
    parts.append(members_table(member_rows(prev, cur), width))
    footer = Text("* holds the anchor; rates are over the last interval; Ctrl-C quits",
                  style="dim")  # fmt: skip
    rows = queue_rows(prev, cur)
    if rows:
        room = None if height is None else height - lines_of(Group(*parts, footer), width)
        parts.extend(queues_that_fit(rows, room, width))
    else:
        parts.append(Text("no queue yet", style="dim"))
    parts.append(footer)
    return Group(*parts)
