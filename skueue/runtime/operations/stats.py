"""``skueue stats``: this process's own view, and the gathering of every member's.

The local view is what the core says of itself (:meth:`Process.stats`) plus the host's
counters; the gathering asks each peer for its view and answers when all replied or when
the deadline passes (naming who did not answer)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs

from skueue.host.host import Host
from skueue.host.queue_stats import merge, nothing
from skueue.host.replies import StatsReply


def local_stats(host: Host) -> dict[str, Any]:
    """This process's part of ``skueue stats``, from the core's own account of itself."""
    core, clients = host.process.stats(), host.clients
    return {
        "process": core.process_id,
        "structure": core.structure.value,
        "entries": core.entries,
        "entries_per_node": {name: node.entries for name, node in core.nodes.items()},
        "pending_ops": host.clients.pending_ops,
        "leases_held": core.leases_held,
        "anchor": core.anchor,
        "joining": not core.joined,
        "leaving": core.leaving,
        "size": core.size,
        "queues": None if core.queues is None else {
            name: {"size": size, "structure": structure, "max_deliveries": limit,
                   "priorities": levels}
            for name, (size, structure, limit, levels) in core.queues.items()
        },
        "queue_stats": clients.queue_stats.as_dict(),
        **clients.totals(),
        "inherited_from": list(clients.inherited_from),
    }


@attrs.define
class Gathering:
    client: int
    rid: int
    deadline: float
    waiting: set[str]
    answers: dict[str, Any]
    down: dict[str, float]  # members whose link is down, seconds since


class StatsGathering:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.pending: dict[int, Gathering] = {}
        self.qids = itertools.count(1)
        self.last_qid = 0

    def start(
        self,
        client: int,
        rid: int,
        own: dict[str, Any],
        peers: list[str],
        now: float,
        down: dict[str, float] | None = None,
    ) -> None:
        """Ask ``peers`` (every other member in the directory); ``down`` are those whose
        link is down (they are still asked: a link may just have come back)."""
        self.last_qid = next(self.qids)
        self.pending[self.last_qid] = Gathering(
            client, rid, now + self.timeout_s, set(peers), {own["process"]: own}, dict(down or {})
        )

    def answer(self, peer: str, qid: Any, stats: Any) -> None:
        g = self.pending.get(qid) if type(qid) is int else None
        if g is None or peer not in g.waiting or not isinstance(stats, dict):
            return  # late, unknown or malformed: the gathering does without it
        g.waiting.discard(peer)
        g.answers[peer] = stats

    def complete(self) -> list[tuple[int, StatsReply]]:
        done = [q for q, g in self.pending.items() if not g.waiting]
        return [self._reply(self.pending.pop(q)) for q in done]

    def expired(self, now: float) -> list[tuple[int, StatsReply]]:
        done = [q for q, g in self.pending.items() if g.deadline <= now]
        return [self._reply(self.pending.pop(q)) for q in done]

    def seconds_to_deadline(self, now: float) -> float:
        if not self.pending:
            return math.inf
        return max(0.0, min(g.deadline for g in self.pending.values()) - now)

    @staticmethod
    def _reply(g: Gathering) -> tuple[int, StatsReply]:
        members = [g.answers[k] for k in sorted(g.answers)]
        anchor = next((m for m in members if m.get("anchor")), None)
        totals = {
            key: sum(m.get(key, 0) for m in members if isinstance(m.get(key, 0), int))
            for key in ("inserted", "removed", "empty", "entries", "pending_ops")
        }
        # Members that did not answer in time: their counts are missing from every total
        # and queue figure, which says so rather than look complete (issue 28, item 7).
        missing = sorted(g.waiting)
        summary = {
            "processes": len(members) + len(g.waiting),
            "size": anchor.get("size") if anchor else None,
            "partial": bool(missing),
            "missing": missing,
            "queues": _queues(anchor, members, missing),
            # Why the size may be unknown: no answer came from the anchor's process, or
            # every member answered and the anchor is being handed over (update phase).
            "anchor": anchor.get("process") if anchor else None,
            "totals": totals,
            "members": members,
            "unreachable": missing,
            "down": {p: round(s, 1) for p, s in sorted(g.down.items()) if p in g.waiting},
        }
        return g.client, StatsReply(g.rid, summary)


def _queues(
    anchor: dict[str, Any] | None, members: list[dict[str, Any]], missing: list[str]
) -> dict[str, Any]:
    """Every queue: its structure and depth from the anchor (None while it is not heard
    from), and its counts and rates added up over the members (partial: without those
    of the ``missing`` members).  A name the members counted that the anchor does not
    hold was deleted: "deleted", and nothing waits."""
    counted = merge(m.get("queue_stats") or {} for m in members)
    known = (anchor or {}).get("queues") or {}
    out: dict[str, Any] = {}
    for name in sorted(set(known) | set(counted)):
        at_anchor = known.get(name) or {}
        deleted = anchor is not None and name not in known
        out[name] = {
            "structure": "deleted" if deleted else at_anchor.get("structure"),
            "size": 0 if deleted else at_anchor.get("size"),
            "max_deliveries": at_anchor.get("max_deliveries", 0),
            "priorities": at_anchor.get("priorities", 1),
            **(counted.get(name) or nothing()),
            "partial": bool(missing),
            "missing": missing,
        }
    return out
