"""``skueue top``: a live view of the cluster, refreshed every ``--interval`` seconds.

Each refresh sends one stats request, as ``skueue stats`` does (an administrative
connection, ``$SKUEUE_TOKEN`` where the daemon wants one): the daemon it goes to gathers
every member's counters, CPU and memory.  The view (:mod:`skueue.cli.top_view`) shows the
difference between the last two answers.

When the daemon cannot be asked (down, refused, too slow) the view says so above the
last answer and tries again every interval; it never ends on its own.  With several
addresses (``--node A,B,C``) each attempt takes the first that answers, so the view
goes on through another member when one dies.  ``--once`` takes two answers one
interval apart, prints one frame and exits: 0, or 1 when no answer came.  Ctrl-C exits
130, quietly.  Into a pipe or a file, each frame is printed after the last (top -b).
"""

from __future__ import annotations

import argparse
import os
import ssl
import time
from collections.abc import Callable
from typing import Any

import trio
from rich.console import Console, RenderableType
from rich.live import Live

from skueue.cli.args import EXIT_FAILED
from skueue.cli.client_cmds import add_tls_options, request_timeout, tls_of
from skueue.cli.nodes import default_node, seed_addresses
from skueue.cli.running import client_error, run_async
from skueue.cli.top_view import Snapshot, render
from skueue.client.api import DEFAULT_NODE, connect

PROG = "skueue top"
INTERVAL_S = 1.0
INTERVAL_MIN_S = 0.2
"""Each refresh makes every member answer a stats query: not more than five a second."""
TIMEOUT_S = 5.0
ONCE_WIDTH = 160
"""Columns of a ``--once`` frame printed to a file or a pipe ($COLUMNS, or the
terminal's own, otherwise)."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "top",
        help="live view of the cluster: per member and per queue",
        description="A live view, refreshed every --interval seconds: per member its "
        "operations per second by kind, pending operations, entries stored, leases held, "
        "CPU, memory and links found down; per queue its depth and insert and remove "
        "rates. Rates are over the last interval. Ctrl-C quits.",
    )
    p.add_argument(
        "--node",
        type=seed_addresses,
        default=None,
        metavar="ADDR[,ADDR...]",
        help=f"daemon(s) to ask; the first that answers (default: $SKUEUE_NODE, else "
        f"{DEFAULT_NODE})",
    )
    p.add_argument(
        "--interval",
        type=interval,
        default=INTERVAL_S,
        metavar="SECONDS",
        help=f"seconds between refreshes (at least {INTERVAL_MIN_S:g})",
    )
    p.add_argument(
        "--timeout",
        type=request_timeout,
        default=TIMEOUT_S,
        metavar="SECONDS",
        help="give up on one answer after this long (and show the daemon as unreachable)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="print one frame (two answers one interval apart) and exit: 0, or 1 if no answer came",
    )
    add_tls_options(p)
    p.set_defaults(run=run_top)


def interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value < float("inf"):  # inf, nan
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds")
    if value < INTERVAL_MIN_S:
        raise argparse.ArgumentTypeError(
            f"{text} must be at least {INTERVAL_MIN_S:g} (INTERVAL_MIN_S)"
        )
    return value


class Watch:
    """The last two answers and the last problem, and the loop that keeps them fresh."""

    def __init__(
        self, node: str, interval_s: float, timeout_s: float, tls: ssl.SSLContext | None = None
    ) -> None:
        self.node = node
        self.tls = tls
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.prev: Snapshot | None = None
        self.cur: Snapshot | None = None
        self.problem: str | None = None
        self.via = node
        self.console = Console()
        # A live view fills the screen: its queues are cut to the terminal's lines.  A
        # frame printed to a file or a pipe lists them all.
        self.fit_height = False

    def frame(self) -> RenderableType:
        return render(
            self.via,
            self.prev,
            self.cur,
            interval_s=self.interval_s,
            problem=self.problem,
            width=self.console.width,  # read again each time: the terminal may be resized
            height=self.console.height if self.fit_height else None,
        )

    async def run(self, show: Callable[[RenderableType], None], answers: int | None) -> None:
        """Ask, show, wait, again; after ``answers`` answers or attempts (None: never)."""
        left = answers
        while left is None or left > 0:
            try:
                async with connect(
                    self.node, admin=True, request_timeout_s=self.timeout_s,
                    timeout_s=self.timeout_s, tls=self.tls,
                ) as q:  # fmt: skip
                    self.via = q.address
                    while left is None or left > 0:
                        started = trio.current_time()
                        stats = await q.stats()
                        self.prev, self.cur = (
                            self.cur,
                            Snapshot(trio.current_time(), time.time(), stats),
                        )
                        self.problem = None
                        show(self.frame())
                        left = None if left is None else left - 1
                        if left != 0:
                            await trio.sleep_until(started + self.interval_s)
            except BaseException as e:  # noqa: BLE001 - anything but a client error re-raised
                error = client_error(e)
                if error is None:
                    raise
                self.problem = str(error)
                show(self.frame())
                left = None if left is None else left - 1
                if left != 0:
                    await trio.sleep(self.interval_s)


def run_top(args: argparse.Namespace) -> int:
    tls = tls_of(PROG, args)
    watch = Watch(args.node or default_node(), args.interval, args.timeout, tls)
    if args.once:
        if not watch.console.is_terminal and "COLUMNS" not in os.environ:
            watch.console = Console(width=ONCE_WIDTH)
        run_async(PROG, lambda: watch.run(lambda _: None, answers=2))
        watch.console.print(watch.frame())
        return EXIT_FAILED if watch.problem is not None or watch.cur is None else 0

    async def printed() -> None:
        # Not a terminal (a pipe, a file): every frame printed after the last, like top -b.
        if "COLUMNS" not in os.environ:
            watch.console = Console(width=ONCE_WIDTH)
        await watch.run(watch.console.print, answers=None)

    async def live() -> None:
        watch.fit_height = True
        with Live(watch.frame(), console=watch.console, screen=True, auto_refresh=False) as view:

            def show(frame: RenderableType) -> None:
                view.update(frame, refresh=True)

            await watch.run(show, answers=None)

    run_async(PROG, live if watch.console.is_terminal else printed)
    return 0
