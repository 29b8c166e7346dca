"""``skueue top`` on a short terminal (issue 28, item 15): at 80x24 the queues' table
was cut by the screen with no word of what was left out (``default``, 48 waiting, was
hidden).  The view lists the queues that fit and ends the table with "… N more queues",
what waits in them included; printed to a file or a pipe it lists every queue."""

from __future__ import annotations

import io
import re

from rich.console import Console

from skueue.cli.top_cmd import Watch
from skueue.cli.top_view import Snapshot, render
from tests.unit.test_top_view import answer, member, text

QUEUE_ROW = re.compile(r"^\s+(\S+)\s+queue\s+(\d+)\s")


def snapshots(queues: int) -> tuple[Snapshot, Snapshot]:
    members = [member(f"127.0.0.1:{7400 + i}", anchor=i == 0) for i in range(3)]
    named = {f"q{i:02d}": {"size": i, "structure": "queue"} for i in range(queues - 1)}
    named["default"] = {"size": 48, "structure": "queue", "inserted": 50, "removed": 2}
    return Snapshot(0.0, 0.0, answer(*members, queues=named)), Snapshot(
        1.0, 1.0, answer(*members, queues=named)
    )


def screen(renderable: object, width: int, height: int) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, height=height, color_system=None).print(renderable)
    return out.getvalue().splitlines()


def listed(lines: list[str]) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in map(QUEUE_ROW.match, lines) if m}


def test_at_80x24_the_cut_queues_are_counted_in_a_more_line() -> None:
    prev, cur = snapshots(30)
    lines = screen(render("n", prev, cur, width=80, height=24), 80, 24)
    assert len(lines) <= 24, "\n".join(lines)
    shown = listed(lines)
    assert "default" in shown and 0 < len(shown) < 30
    more = [ln for ln in lines if ln.startswith("…")]
    assert len(more) == 1, "\n".join(lines)
    hidden = 30 - len(shown)
    waiting = sum(range(29)) + 48 - sum(shown.values())
    assert more[0].startswith(f"… {hidden} more queues, {waiting} waiting in them"), more[0]
    assert lines[-1].startswith("* holds the anchor")  # the footer is not pushed off


def test_what_fits_is_listed_whole_with_no_more_line() -> None:
    prev, cur = snapshots(3)
    lines = screen(render("n", prev, cur, width=80, height=24), 80, 24)
    assert len(listed(lines)) == 3 and not any(ln.startswith("…") for ln in lines)


def test_without_a_height_every_queue_is_listed() -> None:
    prev, cur = snapshots(30)
    lines = text(render("n", prev, cur, width=80), width=80).splitlines()
    assert len(listed(lines)) == 30 and not any(ln.startswith("…") for ln in lines)


def test_the_live_view_fits_the_terminals_height_and_a_printed_frame_does_not() -> None:
    watch = Watch("n", 1.0, 5.0)
    watch.console = Console(file=io.StringIO(), width=80, height=24, color_system=None)
    watch.prev, watch.cur = snapshots(30)
    watch.fit_height = True
    assert len(screen(watch.frame(), 80, 24)) <= 24
    watch.fit_height = False
    assert len(listed(screen(watch.frame(), 80, 24))) == 30
