"""``skueue consume`` and ``skueue dlq``: leased delivery from the command line (issue 12).

``consume NAME`` takes leased messages through the prefetching consumer
(:mod:`skueue.client.consumer`).  Without ``--exec`` it prints each one (as ``dequeue``
does) and acks it once printed; with ``--exec CMD`` it runs ``sh -c CMD`` per message,
the message on its stdin and ``SKUEUE_QUEUE``, ``SKUEUE_DELIVERIES`` and
``SKUEUE_REASON`` in its environment, and acks when CMD exits 0, nacks otherwise (the
message goes back at the tail, one delivery more; past ``--max-deliveries`` to
``NAME.dlq``).  It runs until Ctrl-C (exit 130, what was fetched but not handed out goes
back), ``--count N`` messages, or ``--idle S`` seconds without one; a summary line goes
to stderr at the end.

``dlq NAME`` lists the dead letters of NAME (``NAME.dlq``): each with how often it was
delivered and why it last came back; looking is no delivery, they stay as they were, and
the dead letters' stats count nothing for it.  ``--move`` puts them back into NAME as new
elements (their counts start again) and removes them from the dead letters.  Neither
makes ``NAME.dlq`` where there is none.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import anyio

from skueue.cli.args import integer_in, positive_float, positive_int, seconds_up_to
from skueue.cli.client_cmds import add_node_option, add_timeout_option, queue_name, with_client
from skueue.cli.json_records import json_element
from skueue.client.api import DEFAULT_REQUEST_TIMEOUT_S, Client
from skueue.client.consumer import Leased, Message
from skueue.core.ops import DELIVERY_LIMIT_MAX, dead_letter_problem, dead_letter_queue
from skueue.host.requests import LEASE_MS_MAX

LIST_LEASE_S = 30.0  # how long `skueue dlq` holds what it shows


def dead_letter_owner(text: str) -> str:
    """A queue name that leaves room for its dead letters' ``.dlq``."""
    problem = dead_letter_problem(queue_name(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "consume",
        help="take leased messages, ack each when done",
        description="Take messages from NAME with a lease, through a local prefetch "
        "buffer. Each is printed and acked, or with --exec passed to CMD on stdin and "
        "acked when CMD exits 0, nacked otherwise. Runs until Ctrl-C, --count or --idle.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("queue", type=dead_letter_owner, metavar="NAME", help="the queue")
    p.add_argument(
        "--prefetch", type=positive_int, default=100, metavar="N",
        help="messages fetched ahead, leased (default 100)",
    )  # fmt: skip
    p.add_argument(
        "--lease", type=seconds_up_to(LEASE_MS_MAX / 1000, "LEASE_MS_MAX"), default=30.0,
        metavar="SECONDS",
        help="how long a message is held for its run before it goes back (default 30)",
    )  # fmt: skip
    p.add_argument(
        "--max-deliveries", type=integer_in(1, DELIVERY_LIMIT_MAX, "DELIVERY_LIMIT_MAX"),
        default=None, metavar="N",
        help="returned after N deliveries, a message goes to NAME.dlq (default: never)",
    )  # fmt: skip
    p.add_argument("--exec", dest="command", default=None, metavar="CMD",
                   help="run `sh -c CMD` per message, the message on its stdin")  # fmt: skip
    p.add_argument(
        "-n", "--count", type=positive_int, default=None, metavar="N",
        help="stop after N messages",
    )  # fmt: skip
    p.add_argument(
        "--idle", type=positive_float, default=None, metavar="SECONDS",
        help="stop after this long without a message",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print each message as JSON")
    p.set_defaults(run=run_consume)

    p = sub.add_parser(
        "dlq",
        help="list a queue's dead letters, or move them back",
        description="List the dead letters of NAME (NAME.dlq) with their delivery counts "
        "and why they last came back; with --move, put them back into NAME.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("queue", type=dead_letter_owner, metavar="NAME", help="the queue")
    p.add_argument(
        "-n", "--count", type=positive_int, default=100, metavar="N",
        help="at most this many (default 100)",
    )  # fmt: skip
    p.add_argument("--move", action="store_true", help="move them back into NAME")
    p.add_argument("--json", action="store_true", help="print each as JSON")
    p.set_defaults(run=run_dlq)


def run_consume(args: argparse.Namespace) -> int:
    tally = {"acked": 0, "nacked": 0, "lost": 0}

    async def handle(msg: Message) -> None:
        if args.command is None:
            write(msg.value, msg.leased, args.json)
            ok = True
        else:
            ok = await anyio.to_thread.run_sync(run_command, args.command, args.queue, msg)
        done = bool(await (msg.ack() if ok else msg.nack()))
        tally["acked" if ok else "nacked"] += done
        tally["lost"] += not done  # its lease had ended: it went back, comes again

    async def body(q: Client) -> None:
        consumer = q.consume(
            args.queue, prefetch=args.prefetch, lease=args.lease,
            max_deliveries=args.max_deliveries, idle=args.idle,
        )  # fmt: skip
        async with consumer:
            taken = 0
            async for msg in consumer:
                await handle(msg)
                taken += 1
                if args.count is not None and taken >= args.count:
                    break

    try:
        with_client("skueue consume", args, body)
    finally:
        summary = f"{tally['acked']} acked, {tally['nacked']} nacked"
        if tally["lost"]:
            summary += f", {tally['lost']} whose lease had ended (they come again)"
        print(f"skueue consume: {summary}", file=sys.stderr)
    return 0


def run_command(command: str, queue: str, msg: Message) -> bool:
    env = {
        **os.environ,
        "SKUEUE_QUEUE": queue,
        "SKUEUE_DELIVERIES": str(msg.deliveries),
        "SKUEUE_REASON": msg.reason,
    }
    done = subprocess.run(["sh", "-c", command], input=msg.value, env=env, check=False)  # noqa: S603
    return done.returncode == 0


def run_dlq(args: argparse.Namespace) -> int:
    dead = dead_letter_queue(args.queue)

    async def body(q: Client) -> list[Leased]:
        # A remove would make NAME.dlq where there is none (counted against QUEUES_MAX):
        # a peek makes nothing, and an empty or missing one has nothing to list.
        if await q.peek(queue=dead) is None:
            return []
        got = await q.lease_many(
            args.count, dead, None, None, LIST_LEASE_S, None, fetch=True, look=not args.move
        )
        if not args.move:
            await q.release(got, keep=True)  # a look: they stay as they were
            return got
        if got:
            await q.enqueue_many([m.value for m in got], queue=args.queue)
            await q.ack_many(got)
        return got

    got = with_client("skueue dlq", args, body)
    for m in got:
        write(m.value, m, args.json, dead_letter=True)
    verb = "moved" if args.move else "listed"
    where = f" from {dead} back to {args.queue}" if args.move else f" in {dead}"
    print(f"{verb} {len(got)}{where}", file=sys.stderr if not args.move else sys.stdout)
    return 0


def write(value: bytes, leased: Leased, as_json: bool, dead_letter: bool = False) -> None:
    """One message on stdout.  A dead letter shows the deliveries it had before this look."""
    deliveries = leased.deliveries - 1 if dead_letter else leased.deliveries
    out = sys.stdout.buffer
    if as_json:
        record = {**json_element(value, leased.position), "deliveries": deliveries,
                  "reason": leased.reason}  # fmt: skip
        out.write(json.dumps(record).encode() + b"\n")
    elif dead_letter:
        why = leased.reason or "unknown"
        out.write(value + f"\t({deliveries} deliveries, last returned: {why})\n".encode())
    else:
        out.write(value + b"\n")
    out.flush()
