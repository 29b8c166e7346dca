"""``skueue stats`` as people read it: the cluster's summary, or one queue's block.

The daemon's summary is a plain map (``runtime/operations/stats.py`` says what it holds); a figure
a member could not give (it was unreachable) is said so, never shown as a zero.
"""

from __future__ import annotations

from typing import Any

from skueue.cli.top_view import bytes_text, partial_note
from skueue.core.ops import DEFAULT_QUEUE


def _rates(rates: Any) -> str:
    if not isinstance(rates, list):
        return "?"
    return ", ".join(f"{r:g}" for r in rates)


def format_queue(q: dict[str, Any]) -> str:
    """One queue's block of ``skueue stats NAME``."""
    size = q.get("size")
    return "\n".join([
        f"queue {q.get('queue')} ({q.get('structure') or 'structure unknown'}"
        + (f", delivery limit {q['max_deliveries']}" if q.get("max_deliveries") else "")
        + (f", {q['priorities']} priority levels)" if q.get("priorities", 1) > 1 else ")"),
        f"  waiting: {'unknown (anchor unreachable)' if size is None else size}",
        f"  inserted {q.get('inserted', 0)}, removed {q.get('removed', 0)}, "
        f"empty results {q.get('empty', 0)}, removed by deletes {q.get('deleted', 0)}",
        f"  leased {q.get('leased', 0)}, acked {q.get('acked', 0)}, nacked "
        f"{q.get('nacked', 0)}, expired {q.get('expired', 0)}, dead-lettered "
        f"{q.get('dead_lettered', 0)}",
        f"  inserts/s over 1, 5, 15 min: {_rates(q.get('insert_rate'))}",
        f"  removes/s over 1, 5, 15 min: {_rates(q.get('remove_rate'))}",
        *_partial(q, "the counts above", "  "),
    ])  # fmt: skip


def _durability(member: dict[str, Any]) -> str:
    durable = member.get("durable")
    if not isinstance(durable, dict):
        return "  (in memory)" if "durable" in member else ""
    log_mib = (durable.get("log_bytes") or 0) / (1024 * 1024)
    free = durable.get("free_bytes")
    space = f", {bytes_text(free)} free" if isinstance(free, int) else ""
    refused = durable.get("refused_for_space") or 0
    if refused:
        space += f", {refused} enqueue requests refused below the disk reserve"
    replicas = durable.get("replicas")
    lag = durable.get("replica_lag") or {}
    behind = (" (entries behind: " + ", ".join(f"{h} {n}" for h, n in sorted(lag.items()))
              + ")") if isinstance(lag, dict) and lag else ""  # fmt: skip
    group = (f"{len(replicas)} replica{'s' if len(replicas) != 1 else ''}{behind}, term "
             f"{durable.get('term')}, {_copies(durable.get('copies'))}{_failover(durable)}"
             if isinstance(replicas, list) else "")  # fmt: skip
    return (
        f"  (durable in {durable.get('data_dir')}, fsync {durable.get('fsync')}, {group}"
        f"log {log_mib:.1f} MiB since the last snapshot{space})"
    )


def _failover(durable: dict[str, Any]) -> str:
    """With failover: the processes this member serves for others, and whether its own
    is led by another member (it keeps a copy of it then: runtime/failover.py)."""
    text = ""
    if "led_by" in durable:
        text += f"its process led by {durable.get('led_by') or 'no one yet'} (a backup of it), "
    standing = durable.get("stands_in_for")
    if isinstance(standing, dict) and standing:
        text += "stands in for " + ", ".join(f"{p} (at {a})" for p, a in sorted(standing.items()))
        text += ", "
    lost = durable.get("hosts_lost")
    if isinstance(lost, list) and lost:
        learners = ", ".join(map(str, durable.get("learners") or []))
        text += f"hosts lost for good: {', '.join(map(str, lost))} (re-replication"
        text += f"; new replica catching up: {learners}), " if learners else "), "
    return text


def _copies(copies: Any) -> str:
    """The copies a member keeps of other processes' groups: the leaders' checks of
    their states, those without a state, and those being rebuilt (found empty at a
    restart, not caught up with their leader yet: runtime/follower_slot.py)."""
    if not isinstance(copies, dict) or not copies:
        return ""
    held = [c for c in copies.values() if isinstance(c, dict)]
    passed = sum(c.get("checked") or 0 for c in held)
    diverged = sum(c.get("diverged") or 0 for c in held)
    stateless = sum(1 for c in held if c.get("applied") is None)
    rebuilding = sum(1 for c in held if c.get("rebuilding"))
    text = f"{len(copies)} copies of others ({passed} checks passed"
    text += f", {diverged} DIVERGED" if diverged else ""
    text += f", {stateless} without a state" if stateless else ""
    text += f", {rebuilding} being rebuilt" if rebuilding else ""
    return text + "), "


def _named_queues(queues: Any) -> list[str]:
    """One line per queue when the cluster holds more than its default queue."""
    if not isinstance(queues, dict) or set(queues) <= {DEFAULT_QUEUE}:
        return []
    lines = [f"queues: {len(queues)}"]
    for name, q in sorted(queues.items()):
        if isinstance(q, dict):
            lines.append(
                f"  {name} ({q.get('structure')}): {q.get('size')} waiting; inserted "
                f"{q.get('inserted', 0)}, removed {q.get('removed', 0)}; inserts/s "
                f"{_rates(q.get('insert_rate'))}, removes/s {_rates(q.get('remove_rate'))} "
                "(1, 5, 15 min)"
            )
    return lines


def _partial(figures: dict[str, Any], lacking: str, indent: str = "") -> list[str]:
    note = partial_note(figures.get("missing"), lacking)
    return [] if note is None else [indent + note]


def format_stats(stats: dict[str, Any]) -> str:
    t = stats.get("totals", {})
    size = stats.get("size")
    lines = [
        f"processes: {stats.get('processes')}",
        *_partial(stats, "the totals and queue counts below"),
        f"queue size: {'unknown (anchor unreachable)' if size is None else size}",
        *_named_queues(stats.get("queues")),
        f"totals: inserted {t.get('inserted', 0)}, removed {t.get('removed', 0)}, "
        f"empty results {t.get('empty', 0)}, stored entries {t.get('entries', 0)}, "
        f"pending operations {t.get('pending_ops', 0)}",
        "entries stored per process:",
    ]
    for m in stats.get("members", []):
        anchor = "  (anchor)" if m.get("anchor") else ""
        lines.append(f"  {m.get('process')}: {m.get('entries')}{anchor}{_durability(m)}")
    unreachable = stats.get("unreachable") or []
    if unreachable:
        lines.append(f"unreachable: {', '.join(unreachable)}")
    return "\n".join(lines)
