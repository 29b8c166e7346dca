"""A step's frames, replies and acknowledgements leave only once the group committed
its entries, in step order (runtime/held_effects.py; docs/replication.md §5.1, I2)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skueue.runtime.held_effects import HeldEffects, HeldStep


def step(index: int, tag: int) -> HeldStep:
    frames: dict[str, list[Any]] = defaultdict(list)
    frames[f"p{tag % 2}"].append(["msg", tag])
    return HeldStep(index, frames, [(tag, f"reply {tag}")], {f"p{tag % 2}": tag})


def test_nothing_leaves_before_its_step_is_committed() -> None:
    held = HeldEffects()
    held.hold(step(3, 1))
    held.hold(step(5, 2))
    out = held.release(2)
    assert not out.peer_frames and not out.replies and not out.handled and len(held) == 2
    out = held.release(4)
    assert out.replies == [(1, "reply 1")] and out.handled == {"p1": 1} and len(held) == 1
    out = held.release(5)
    assert out.replies == [(2, "reply 2")] and dict(out.peer_frames) == {"p0": [["msg", 2]]}


@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.data())
def test_released_in_step_order_exactly_once(gaps: list[int], data: st.DataObject) -> None:
    held, index, released = HeldEffects(), 0, []
    commit = 0
    for tag, gap in enumerate(gaps):
        index += gap
        held.hold(step(index, tag))
        commit = data.draw(st.integers(commit, index), label="commit")
        out = held.release(commit)
        released.extend(r[0] for r in out.replies)
        # An ack says the last frame taken of each peer's link, never a later one.
        for peer, number in out.handled.items():
            assert number == max(r[0] for r in out.replies if f"p{r[0] % 2}" == peer)
    released.extend(r[0] for r in held.release(index).replies)
    assert released == list(range(len(gaps)))


def test_a_leaver_waits_for_its_steps_up_to_the_leave_and_not_after() -> None:
    """(Daemon.drain_links) Once its departure is out, the others drop their copies
    of its group: what it steps after the leave never commits, and is not waited for."""
    held = HeldEffects()
    assert not held.holds_through(10)
    held.hold(step(7, 0))  # the leave's step
    held.hold(step(9, 1))  # a tick after it
    assert held.holds_through(7) and held.holds_through(8)
    held.release(7)
    assert not held.holds_through(7) and not held.holds_through(8)
    assert held.holds_through(9)
