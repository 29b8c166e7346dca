"""``skueue enqueue``, ``skueue dequeue`` and ``skueue stats``: one request each to a daemon.

``--node`` defaults to ``$SKUEUE_NODE``, else 127.0.0.1:7400.  Errors (unreachable
node, bad address, bad value) are one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from cli.args import fail, positive_int
from skueue.client import DEFAULT_NODE, Client, SkueueError, connect

EXIT_EMPTY = 3
EXIT_UNREACHABLE = 1
T = TypeVar("T")


def default_node() -> str:
    return os.environ.get("SKUEUE_NODE") or DEFAULT_NODE


def add_node_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--node",
        default=None,
        metavar="ADDR",
        help=f"daemon to talk to (default: $SKUEUE_NODE, else {DEFAULT_NODE})",
    )


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "enqueue",
        help="add elements (push on a stack daemon)",
        description="Add elements; '-' reads one element per line from stdin.",
    )
    add_node_option(p)
    p.add_argument("values", nargs="+", metavar="VALUE")
    p.set_defaults(run=run_enqueue)

    p = sub.add_parser(
        "dequeue",
        help="remove elements (pop on a stack daemon)",
        description="Remove elements and print one per line. Exits 3 when the "
        "queue was empty for any requested element.",
    )
    add_node_option(p)
    p.add_argument("-n", "--count", type=positive_int, default=1)
    p.set_defaults(run=run_dequeue)

    p = sub.add_parser(
        "join",
        help="make a lone daemon join another cluster",
        description="Make the daemon at --node (alone and empty) join the cluster SEED is "
        "in; returns once it is in the ring.",
    )
    add_node_option(p)
    p.add_argument("seed", metavar="SEED", help="address of any daemon of the cluster")
    p.set_defaults(run=run_join)

    p = sub.add_parser(
        "leave",
        help="make a daemon hand off its data and exit",
        description="Make the daemon at --node leave the cluster; returns 0 only once its "
        "data is held by the others.",
    )
    add_node_option(p)
    p.set_defaults(run=run_leave)

    p = sub.add_parser(
        "stats",
        help="cluster statistics",
        description="Processes, queue size, totals and entries per process.",
    )
    add_node_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run_stats)


def with_client(prog: str, node: str | None, body: Callable[[Client], Awaitable[T]]) -> T:
    async def main() -> T:
        async with connect(node or default_node()) as q:
            return await body(q)

    try:
        return trio.run(main)
    except SkueueError as e:
        fail(prog, str(e), code=EXIT_UNREACHABLE)
    except BaseExceptionGroup as group:
        # A connection error surfaces from the client's task group wrapped in a group.
        errors = [e for e in group.exceptions if isinstance(e, SkueueError)]
        if errors:
            fail(prog, str(errors[0]), code=EXIT_UNREACHABLE)
        raise


def read_values(values: list[str]) -> list[bytes]:
    out: list[bytes] = []
    for v in values:
        if v == "-":
            out.extend(line.rstrip(b"\r\n") for line in sys.stdin.buffer)
        else:
            out.append(v.encode("utf-8", errors="surrogateescape"))
    return out


def run_enqueue(args: argparse.Namespace) -> int:
    values = read_values(args.values)
    if not values:
        fail("skueue enqueue", "no values to enqueue (stdin was empty)")

    async def body(q: Client) -> None:
        # Large inputs go in requests of bounded size, in order.
        for i in range(0, len(values), 1000):
            await q.enqueue_many(values[i : i + 1000])

    with_client("skueue enqueue", args.node, body)
    return 0


def run_dequeue(args: argparse.Namespace) -> int:
    async def body(q: Client) -> list[bytes]:
        return await q.dequeue_many(args.count)

    got = with_client("skueue dequeue", args.node, body)
    out = sys.stdout.buffer
    for value in got:
        out.write(value + b"\n")
    out.flush()
    empty = args.count - len(got)
    if empty:
        print(
            f"skueue dequeue: the queue was empty for {empty} of {args.count} requested "
            "element(s)",
            file=sys.stderr,
        )
        return EXIT_EMPTY
    return 0


def run_join(args: argparse.Namespace) -> int:
    async def body(q: Client) -> None:
        await q.join(args.seed)

    with_client("skueue join", args.node, body)
    print(f"joined the cluster of {args.seed}", file=sys.stderr)
    return 0


def run_leave(args: argparse.Namespace) -> int:
    async def body(q: Client) -> None:
        await q.leave()

    with_client("skueue leave", args.node, body)
    print("left: its data is held by the other daemons", file=sys.stderr)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    async def body(q: Client) -> dict[str, Any]:
        return await q.stats()

    stats = with_client("skueue stats", args.node, body)
    if args.json:
        json.dump(stats, sys.stdout, indent=2, default=repr)
        sys.stdout.write("\n")
        return 0
    print(format_stats(stats))
    return 0


def format_stats(stats: dict[str, Any]) -> str:
    t = stats.get("totals", {})
    size = stats.get("size")
    lines = [
        f"processes: {stats.get('processes')}",
        f"queue size: {'unknown (anchor unreachable)' if size is None else size}",
        f"totals: inserted {t.get('inserted', 0)}, removed {t.get('removed', 0)}, "
        f"empty results {t.get('empty', 0)}, stored entries {t.get('entries', 0)}, "
        f"pending operations {t.get('pending_ops', 0)}",
        "entries stored per process:",
    ]
    for m in stats.get("members", []):
        anchor = "  (anchor)" if m.get("anchor") else ""
        lines.append(f"  {m.get('process')}: {m.get('entries')}{anchor}")
    unreachable = stats.get("unreachable") or []
    if unreachable:
        lines.append(f"unreachable: {', '.join(unreachable)}")
    return "\n".join(lines)
