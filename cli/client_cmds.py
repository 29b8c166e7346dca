"""``skueue enqueue``, ``dequeue``, ``peek``, ``create``, ``delete``, ``stats``, ``join`` and
``leave``: requests to a daemon.

``enqueue`` and ``dequeue`` (and ``push`` and ``pop``, the same) take ``-q``/``--queue
NAME`` (default: the default queue) and ``--structure queue|stack`` (default: NAME's
own, so a stack's name is enough); a name is made by its first operation, a stack by a
push, else of the daemon's structure.

``--node`` (a seed list: ``HOST:PORT[,HOST:PORT...]``, the first that answers serves)
defaults to ``$SKUEUE_NODE``, else 127.0.0.1:7400; ``--timeout`` bounds every
request.  Errors (unreachable node, bad address, bad value, no reply in time) are one
line on stderr and a non-zero exit: 2 for usage errors, 1 for the rest, 130 on Ctrl-C.

Values are bytes, passed through exactly:

* ``VALUE`` arguments are one element each (UTF-8 as the shell gives them);
* ``-`` reads stdin in line mode: one element per line, split at ``\\n`` only, nothing
  stripped (a ``\\r`` stays); empty lines are empty elements; a final ``\\n`` ends the
  last line and does not add an empty element;
* ``-x``/``--stdin`` takes the whole of stdin as one element, ``--file PATH`` a whole file.

``dequeue`` prints each element followed by ``\\n`` (readable, but ambiguous for values
that hold newlines), ``-0``/``--null`` followed by NUL instead, and ``--json`` one JSON
object per line: ``{"base64": ..., "text": ..., "position": ...}`` (``text`` is null
unless the value is valid UTF-8; see :mod:`skueue.cli.json_records`).  ``enqueue
--json`` prints each element's position and the queue's size.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from skueue.cli.args import address, fail, integer_in, positive_int, seconds_up_to
from skueue.cli.json_records import enqueue_record, json_element, queue_size
from skueue.cli.nodes import default_node, one_node, seed_addresses
from skueue.cli.running import run_async
from skueue.cli.stats_format import format_queue, format_stats
from skueue.client.api import (
    DEFAULT_NODE,
    DEFAULT_REQUEST_TIMEOUT_S,
    REQUEST_TIMEOUT_S_MAX,
    Client,
    Removed,
    connect,
)
from skueue.client.errors import RequestRejected
from skueue.client.tls import client_context
from skueue.core.ops import DEFAULT_QUEUE, DELIVERY_LIMIT_MAX, PRIORITIES_MAX, queue_name_problem
from skueue.host.requests import WAIT_MS_MAX

EXIT_EMPTY = 3
EXIT_UNREACHABLE = 1
# Join and leave move data between daemons, which takes longer than one request.
MEMBERSHIP_TIMEOUT_S = 60.0
T = TypeVar("T")


def add_node_option(
    p: argparse.ArgumentParser | Any, tls: bool = True, one: bool = False
) -> None:
    """``--node``, and the TLS options to reach it (``tls``: a caller that puts
    ``--node`` in a group of alternatives adds those to the parser itself).  ``one``: the
    command acts on that very daemon (join, leave), so a seed list would pick whichever
    member answers first: it takes one address."""
    if one:
        p.add_argument(
            "--node", type=address, default=None, metavar="ADDR",
            help="the daemon to act on (default: $SKUEUE_NODE when it names one daemon, "
            f"else {DEFAULT_NODE})",
        )  # fmt: skip
    else:
        p.add_argument(
            "--node",
            type=seed_addresses,
            default=None,
            metavar="ADDR[,ADDR...]",
            help="daemon to talk to; with several, the first that answers (default: "
            f"$SKUEUE_NODE, else {DEFAULT_NODE})",
        )
    if tls:
        add_tls_options(p)


def add_tls_options(p: argparse.ArgumentParser) -> None:
    # Every command that talks to a daemon may need TLS to reach it.
    p.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="connect with TLS, trusting this CA (default: $SKUEUE_TLS_CA; unset: plaintext)",
    )
    p.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="a client certificate to present (default: $SKUEUE_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key", metavar="FILE", help="its private key (default: $SKUEUE_TLS_KEY)"
    )


def tls_of(prog: str, args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context the options ask for; None: the client's default ($SKUEUE_TLS_*)."""
    ca, cert, key = (getattr(args, n, None) for n in ("tls_ca", "tls_cert", "tls_key"))
    if ca is None and cert is None and key is None:
        return None
    env = {n: os.environ.get(f"SKUEUE_{n.upper()}") or None for n in ("tls_ca", "tls_cert",
                                                                       "tls_key")}  # fmt: skip
    try:
        return client_context(
            ca or env["tls_ca"], cert or env["tls_cert"], key or env["tls_key"]
        )
    except RequestRejected as e:
        fail(prog, str(e))


request_timeout = seconds_up_to(REQUEST_TIMEOUT_S_MAX, "REQUEST_TIMEOUT_S_MAX")
"""``--timeout`` of every command that talks to a daemon."""


def add_timeout_option(p: argparse.ArgumentParser, default: float) -> None:
    p.add_argument(
        "--timeout",
        type=request_timeout,
        default=default,
        metavar="SECONDS",
        help="give up on a request after this long (its outcome is then unknown)",
    )


def add_queue_options(p: argparse.ArgumentParser) -> None:
    add_queue_name_option(p, "made by its first operation; ")
    p.add_argument(
        "--structure",
        choices=["queue", "stack"],
        default=None,
        help="insist that NAME is this (default: what NAME is; a new NAME is a stack "
        "for push, else of the daemon's --structure)",
    )


def add_queue_name_option(p: argparse.ArgumentParser, note: str = "") -> None:
    p.add_argument(
        "-q",
        "--queue",
        type=queue_name,
        default=None,
        metavar="NAME",
        help=f"the named queue ({note}default: {DEFAULT_QUEUE})",
    )


def add_element_format_options(p: argparse.ArgumentParser) -> None:
    """How printed elements end: a newline, NUL (-0) or as JSON (--json)."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "-0",
        "--null",
        action="store_true",
        help="end each element with NUL instead of a newline (raw bytes, for xargs -0)",
    )
    mode.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per element: {"base64": ..., "text": UTF-8 text or null, '
        '"position": its place in the queue}',
    )


def queue_name(text: str) -> str:
    problem = queue_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_parsers(sub: Any) -> None:
    # push and pop are enqueue and dequeue under their own names (so that errors name
    # what was typed), but a new NAME becomes a stack.
    for name, help in (("enqueue", "add elements"),
                       ("push", "add elements; a new NAME becomes a stack")):  # fmt: skip
        add_insert_parser(sub, name, help)
    for name, help in (
        ("dequeue", "remove elements: a queue's oldest, a stack's newest"),
        ("pop", "remove elements: a stack's newest, a queue's oldest"),
    ):
        add_remove_parser(sub, name, help)
    add_other_parsers(sub)


def add_insert_parser(sub: Any, name: str, help: str) -> None:
    p = sub.add_parser(
        name,
        help=help,
        description="Add elements, in this order: the VALUE arguments ('-' reads stdin "
        "in line mode: one element per line, split at \\n only, nothing stripped, empty "
        "lines kept), then each --file, then all of stdin with -x. Bytes go in exactly.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    add_queue_options(p)
    p.add_argument(
        "values", nargs="*", metavar="VALUE", help="an element; '-' for stdin, one per line"
    )
    p.add_argument(
        "--file",
        dest="files",
        action="append",
        default=[],
        metavar="PATH",
        help="enqueue the whole file as one element (repeatable)",
    )
    p.add_argument(
        "-x",
        "--stdin",
        dest="whole_stdin",
        action="store_true",
        help="enqueue the whole of stdin as one element",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"queue": ..., "positions": [each element\'s position], "size": the '
        "queue's size right after, or null}",
    )
    p.add_argument(
        "-p",
        "--priority",
        type=integer_in(0, PRIORITIES_MAX - 1, "PRIORITIES_MAX - 1"),
        default=None,
        metavar="P",
        help="the level in a queue made with --priorities (0 the most urgent; past the "
        "last level, the last); other queues ignore it (default: 0)",
    )
    p.set_defaults(run=run_enqueue)


def add_remove_parser(sub: Any, name: str, help: str) -> None:
    p = sub.add_parser(
        name,
        help=help,
        description="Remove up to N elements and print them. Exits 3 when the queue was "
        "empty for any requested element.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    add_queue_options(p)
    p.add_argument(
        "-n", "--count", type=positive_int, default=1, metavar="N", help="elements to remove"
    )
    p.add_argument(
        "-w",
        "--wait",
        type=seconds_up_to(WAIT_MS_MAX / 1000, "WAIT_MS_MAX"),
        default=None,
        metavar="SECONDS",
        help="when the queue is empty, wait up to this long for an element (like BLPOP)",
    )
    add_element_format_options(p)
    p.set_defaults(run=run_dequeue)



def add_other_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "peek",
        help="print the element a dequeue would return now, leaving it in the queue",
        description="Print the element a dequeue of the queue would return now (the "
        "oldest of its most urgent priority level), and leave it there. Linearizable "
        "like a dequeue. Exits 3 when the queue is empty (or no queue has the name). "
        "A stack has no peek.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    add_queue_name_option(p)
    add_element_format_options(p)
    p.set_defaults(run=run_peek)

    p = sub.add_parser(
        "create",
        help="make a named queue with its settings",
        description="Make the queue NAME with these settings, or find it made with them "
        "(exit 0 either way; made with other settings: an error that says which, exit 1). "
        "A name used without create is made by its first operation, with no delivery "
        "limit.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("queue", type=queue_name, metavar="NAME", help="the queue to make")
    p.add_argument(
        "--structure",
        choices=["queue", "stack"],
        default=None,
        help="what it is (default: the daemon's --structure)",
    )
    p.add_argument(
        "--priorities",
        type=integer_in(1, PRIORITIES_MAX, "PRIORITIES_MAX"),
        default=None,
        metavar="P",
        help=f"priority levels, 0 the most urgent (2 to {PRIORITIES_MAX}; a queue only; "
        "default: 1, none)",
    )
    p.add_argument(
        "--max-deliveries",
        type=integer_in(0, DELIVERY_LIMIT_MAX, "DELIVERY_LIMIT_MAX"),
        default=None,
        metavar="N",
        help="a leased element returned more than N times goes to NAME.dlq, whatever "
        "limit its consumer asked for, unless that is smaller (default: none)",
    )
    p.add_argument("--json", action="store_true", help='print {"queue": ..., "created": bool}')
    p.set_defaults(run=run_create)

    p = sub.add_parser(
        "delete",
        help="delete a named queue and what it holds",
        description="Delete the queue (or stack) NAME: the elements it holds are removed "
        "for good, and the name is free for a new queue of either kind (a NAME that holds "
        "no queue is an error, exit 1).  Elements leased "
        "out are not in it: a lease that is returned puts its element in a new queue of "
        "that name.  NAME.dlq is a queue of its own.  With client tokens, it needs an "
        "admin token.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument("queue", type=queue_name, metavar="NAME", help="the queue to delete")
    p.add_argument("--json", action="store_true", help='print {"queue": ..., "removed": N}')
    p.set_defaults(run=run_delete)

    p = sub.add_parser(
        "join",
        help="make a lone daemon join another cluster",
        description="Make the daemon at --node (alone and empty) join the cluster SEED is "
        "in; returns once it is in the ring.",
    )
    add_node_option(p, one=True)
    add_timeout_option(p, MEMBERSHIP_TIMEOUT_S)
    p.add_argument(
        "seed", type=address, metavar="SEED", help="address of any daemon of the cluster"
    )
    p.set_defaults(run=run_join)

    p = sub.add_parser(
        "leave",
        help="make a daemon hand off its data and exit",
        description="Make the daemon at --node leave the cluster; returns 0 only once its "
        "data is held by the others.",
    )
    add_node_option(p, one=True)
    add_timeout_option(p, MEMBERSHIP_TIMEOUT_S)
    p.set_defaults(run=run_leave)

    p = sub.add_parser(
        "stats",
        help="cluster statistics",
        description="Processes, queues, totals and entries per process; with NAME, that "
        "queue's depth, counts and insert/remove rates over 1, 5 and 15 minutes.",
    )
    add_node_option(p)
    add_timeout_option(p, DEFAULT_REQUEST_TIMEOUT_S)
    p.add_argument(
        "queue", nargs="?", type=queue_name, default=None, metavar="NAME", help="one queue"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run_stats)


def with_client(
    prog: str,
    args: argparse.Namespace,
    body: Callable[[Client], Awaitable[T]],
    *,
    admin: bool = False,
) -> T:
    node = args.node or default_node()
    tls = tls_of(prog, args)

    async def main() -> T:
        async with connect(node, request_timeout_s=args.timeout, admin=admin, tls=tls) as q:
            return await body(q)

    return run_async(prog, main)


def lines_of(data: bytes) -> list[bytes]:
    """Line mode: split at ``\\n`` only; a final ``\\n`` ends the last line."""
    if not data:
        return []
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()
    return parts


def read_values(args: argparse.Namespace) -> list[bytes]:
    prog = "skueue enqueue"
    if args.values.count("-") + bool(args.whole_stdin) > 1:
        fail(prog, "stdin can be read once: use either '-' or -x/--stdin, once")
    if not args.values and not args.files and not args.whole_stdin:
        fail(prog, "nothing to enqueue: give VALUE..., '-', --file PATH or -x (see --help)")
    out: list[bytes] = []
    for v in args.values:
        if v == "-":
            out.extend(lines_of(sys.stdin.buffer.read()))
        else:
            out.append(v.encode("utf-8", errors="surrogateescape"))
    for path in args.files:
        try:
            with open(path, "rb") as f:
                out.append(f.read())
        except OSError as e:
            fail(prog, f"cannot read {path}: {e.strerror}")
    if args.whole_stdin:
        out.append(sys.stdin.buffer.read())
    if not out:
        fail(prog, "no values to enqueue (stdin was empty)")
    return out


def run_enqueue(args: argparse.Namespace) -> int:
    values = read_values(args)

    async def body(q: Client) -> dict[str, Any]:
        # The client checks every value against the daemon's limit before sending any,
        # and splits the call into requests that fit; they go in order.
        insert = q.push_many if args.command == "push" else q.enqueue_many
        inserted = await insert(
            values, queue=args.queue, structure=args.structure, priority=args.priority
        )
        size = await queue_size(q, args.queue) if args.json else None
        return enqueue_record(args.queue, inserted, size)

    done = with_client("skueue enqueue", args, body)
    if args.json:
        print(json.dumps(done))
    return 0


def run_dequeue(args: argparse.Namespace) -> int:
    async def body(q: Client) -> list[Removed]:
        removed = await q.remove(
            args.count, queue=args.queue, structure=args.structure, wait=args.wait,
            until_empty=True, stack_if_new=args.command == "pop",
        )  # fmt: skip
        return [r for r in removed if r.value is not None]

    got = with_client(f"skueue {args.command}", args, body)
    print_elements([r.value for r in got if r.value is not None], args, [r.position for r in got])
    empty = args.count - len(got)
    if empty:
        print(
            f"skueue dequeue: the queue was empty for {empty} of {args.count} requested element(s)",
            file=sys.stderr,
        )
        return EXIT_EMPTY
    return 0


def run_peek(args: argparse.Namespace) -> int:
    async def body(q: Client) -> Removed:
        return await q.peek_element(queue=args.queue)

    seen = with_client("skueue peek", args, body)
    if seen.value is None:
        print(f"skueue peek: {args.queue or DEFAULT_QUEUE} is empty", file=sys.stderr)
        return EXIT_EMPTY
    print_elements([seen.value], args, [seen.position])
    return 0


def print_elements(
    values: list[bytes], args: argparse.Namespace, positions: list[int | None] | None = None
) -> None:
    """``positions``: each value's, for ``--json`` (None: not known)."""
    out = sys.stdout.buffer
    for i, value in enumerate(values):
        if args.json:
            position = None if positions is None else positions[i]
            out.write(json.dumps(json_element(value, position)).encode() + b"\n")
        else:
            out.write(value + (b"\0" if args.null else b"\n"))
    out.flush()


def run_create(args: argparse.Namespace) -> int:
    async def body(q: Client) -> bool:
        return await q.create_queue(
            args.queue,
            structure=args.structure,
            max_deliveries=args.max_deliveries,
            priorities=args.priorities,
        )

    created = with_client("skueue create", args, body)
    if args.json:
        print(json.dumps({"queue": args.queue, "created": created}))
    else:
        print(f"{'created' if created else 'found'} {args.queue}", file=sys.stderr)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    async def body(q: Client) -> int:
        return await q.delete_queue(args.queue)

    removed = with_client("skueue delete", args, body)
    if args.json:
        print(json.dumps({"queue": args.queue, "removed": removed}))
    else:
        print(f"deleted {args.queue}: {removed} elements removed", file=sys.stderr)
    return 0


# Join and leave name the daemon that did it: with a seed list, the first that answered.


def run_join(args: argparse.Namespace) -> int:
    async def body(q: Client) -> str:
        await q.join(args.seed)
        return q.address

    args.node = one_node("skueue join", args.node)
    joined = with_client("skueue join", args, body, admin=True)
    print(f"{joined} joined the cluster of {args.seed}", file=sys.stderr)
    return 0


def run_leave(args: argparse.Namespace) -> int:
    async def body(q: Client) -> str:
        await q.leave()
        return q.address

    args.node = one_node("skueue leave", args.node)
    left = with_client("skueue leave", args, body, admin=True)
    print(f"{left} left: its data is held by the other daemons", file=sys.stderr)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    async def body(q: Client) -> dict[str, Any]:
        return await q.stats()

    stats = with_client("skueue stats", args, body, admin=True)
    if args.queue is not None:
        one = (stats.get("queues") or {}).get(args.queue)
        if one is None:
            print(f"skueue stats: error: no queue {args.queue!r} in this cluster (a queue "
                  "is made by its first operation)", file=sys.stderr)  # fmt: skip
            return 1
        stats = {"queue": args.queue, **one}
    if args.json:
        json.dump(stats, sys.stdout, indent=2, default=repr)
        sys.stdout.write("\n")
        return 0
    print(format_queue(stats) if args.queue is not None else format_stats(stats))
    return 0
