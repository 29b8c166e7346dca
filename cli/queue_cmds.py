"""``skueue ls``, ``skueue info NAME`` and ``skueue configure NAME``: looking at the
cluster's queues and changing one's delivery limit (issue 28).

``ls`` lists every queue and stack the cluster holds, one line each: its name,
structure, how many elements wait in it, its priority levels and its delivery limit (as
the anchor has them: what redis-cli's ``KEYS``/``TYPE``/``LLEN`` tell, in one call);
``--json`` prints a list of objects.  ``info NAME`` shows one queue: its settings, what
waits in it and in its dead letters (``NAME.dlq``); the counts and rates are
``skueue stats NAME``'s.  Both read the cluster's statistics (an administrative
connection, as ``stats``), and exit 1 when the anchor's member does not answer, or, for
``info``, when no queue has the name.

``configure NAME --max-deliveries N`` changes the delivery limit of a queue or stack that
exists (0: none), whatever it was made with; it is ordered like a create, so every member
applies it at the same point, and leases granted from then on take it.  A name that holds
no queue is an error (exit 1): configure makes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from skueue.cli.args import EXIT_FAILED, fail, integer_in
from skueue.cli.client_cmds import (
    add_node_option,
    add_timeout_option,
    queue_name,
    with_client,
)
from skueue.client.api import DEFAULT_REQUEST_TIMEOUT_S, Client
from skueue.core.ops import DELIVERY_LIMIT_MAX, QueueSettings, dead_letter_queue

LIST_FIELDS = ("name", "structure", "size", "priorities", "max_deliveries")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "ls",
        help="list the queues: structure, waiting, priorities, delivery limit",
        description="List every queue and stack of the cluster: its structure, how many "
        "elements wait in it, its priority levels and its delivery limit.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(run=run_ls)

    p = sub.add_parser(
        "info",
        help="one queue's settings and what waits in it",
        description="Show the queue NAME: its structure, priority levels and delivery "
        "limit, how many elements wait in it and in NAME.dlq. Exit 1 if no queue has "
        "the name. Counts and rates: skueue stats NAME.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("queue", type=queue_name, metavar="NAME", help="the queue")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run_info)

    p = sub.add_parser(
        "configure",
        help="change the delivery limit of an existing queue",
        description="Change the delivery limit of the queue or stack NAME, whatever it "
        "was made with: a leased element returned more than N times goes to NAME.dlq "
        "(0: never). Leases granted from then on take it. Exit 1 if no queue has the "
        "name (configure makes none).",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("queue", type=queue_name, metavar="NAME", help="the queue")
    p.add_argument(
        "--max-deliveries",
        type=integer_in(0, DELIVERY_LIMIT_MAX, "DELIVERY_LIMIT_MAX"),
        required=True,
        metavar="N",
        help=f"the new delivery limit, 0 (none) to {DELIVERY_LIMIT_MAX}",
    )
    p.add_argument("--json", action="store_true", help="print the settings as JSON")
    p.set_defaults(run=run_configure)


def cluster_queues(prog: str, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The queues the anchor holds, by name (a name that was deleted is not one)."""

    async def body(q: Client) -> dict[str, Any]:
        return await q.stats()

    stats = with_client(prog, args, body, admin=True)
    if stats.get("anchor") is None:
        unreachable = ", ".join(stats.get("unreachable") or []) or "none"
        fail(prog, f"the anchor's member did not answer, so the queues are unknown "
                   f"(unreachable: {unreachable})", EXIT_FAILED)  # fmt: skip
    queues = stats.get("queues") or {}
    return {
        name: q
        for name, q in queues.items()
        if isinstance(q, dict) and q.get("structure") in ("queue", "stack")
    }


def listing(queues: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "structure": q.get("structure"),
            "size": q.get("size"),
            "priorities": q.get("priorities", 1),
            "max_deliveries": q.get("max_deliveries", 0),
        }
        for name, q in sorted(queues.items())
    ]


def format_listing(rows: list[dict[str, Any]]) -> str:
    """One aligned line per queue, under a header."""
    header = {"name": "NAME", "structure": "STRUCTURE", "size": "WAITING",
              "priorities": "PRIORITIES", "max_deliveries": "DELIVERY LIMIT"}  # fmt: skip
    cells = [
        [str(header[f]) for f in LIST_FIELDS],
        *(
            [
                row["name"],
                row["structure"],
                "?" if row["size"] is None else str(row["size"]),
                str(row["priorities"]) if row["priorities"] > 1 else "-",
                str(row["max_deliveries"]) if row["max_deliveries"] else "-",
            ]
            for row in rows
        ),
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(LIST_FIELDS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def run_ls(args: argparse.Namespace) -> int:
    rows = listing(cluster_queues("skueue ls", args))
    if args.json:
        print(json.dumps(rows))
    else:
        print(format_listing(rows))
    return 0


def run_info(args: argparse.Namespace) -> int:
    queues = cluster_queues("skueue info", args)
    q = queues.get(args.queue)
    if q is None:
        fail("skueue info", f"no queue {args.queue!r} in this cluster (see skueue ls)",
             EXIT_FAILED)
    dead = dead_letter_queue(args.queue)
    row = {**listing({args.queue: q})[0], "dead_letters": (queues.get(dead) or {}).get("size", 0)}
    if args.json:
        print(json.dumps(row))
        return 0
    settings = QueueSettings(
        row["structure"] == "stack", row["max_deliveries"], row["priorities"]
    ).describe()
    waiting = "unknown" if row["size"] is None else row["size"]
    print(f"{args.queue}: {settings}")
    print(f"  waiting: {waiting}")
    print(f"  dead letters waiting in {dead}: {row['dead_letters']}")
    return 0


def run_configure(args: argparse.Namespace) -> int:
    async def body(q: Client) -> dict[str, Any]:
        return await q.configure_queue(args.queue, max_deliveries=args.max_deliveries)

    now = with_client("skueue configure", args, body)
    if args.json:
        print(json.dumps({"queue": args.queue, **now}))
        return 0
    settings = QueueSettings(now["structure"] == "stack", now["max_deliveries"], now["priorities"])
    print(f"configured {args.queue}: {settings.describe()}", file=sys.stderr)
    return 0
