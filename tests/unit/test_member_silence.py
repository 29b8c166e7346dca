"""Which members are silent for ``member_lost_after_s`` (runtime/member_silence.py): a
member not heard from that long, counted from when this daemon first looked for it; not
while this daemon itself did not run, nor while it hears from a minority."""

from __future__ import annotations

from skueue.runtime.member_silence import STALL_S, Hearing

AFTER = 10.0
TICK = 0.3


def looked_through(hearing: Hearing, members: list[str], start: float, end: float,
                   speaking: set[str]) -> list[str]:  # fmt: skip
    """Look at every tick from ``start`` to ``end``, ``speaking`` heard at each; what
    the last look found silent."""
    now, silent = start, []
    while now <= end:
        for member in speaking:
            hearing.heard(member, now)
        silent = hearing.silent(members, now, AFTER)
        now += TICK
    return silent


def test_a_member_not_heard_from_for_the_limit_is_silent_and_not_before() -> None:
    hearing = Hearing()
    members = ["a", "b", "c", "d"]
    assert looked_through(hearing, members, 0.0, AFTER - 1, {"a", "b", "c"}) == []
    assert looked_through(hearing, members, AFTER - 1 + TICK, AFTER + 1, {"a", "b", "c"}) == ["d"]
    hearing.heard("d", AFTER + 2)  # back: its silence starts again
    assert hearing.silent(members, AFTER + 2, AFTER) == []


def test_silence_counts_from_when_a_member_is_first_looked_for() -> None:
    """A member that joined long after this daemon started is not silent at once."""
    hearing = Hearing()
    assert looked_through(hearing, ["a", "b"], 0.0, 100.0, {"a", "b"}) == []
    members = ["a", "b", "joiner"]
    assert hearing.silent(members, 100.0 + TICK, AFTER) == []
    assert looked_through(hearing, members, 100.0 + 2 * TICK, 100.0 + AFTER + 1,
                          {"a", "b"}) == ["joiner"]  # fmt: skip


def test_this_daemons_own_stall_is_nobodys_silence() -> None:
    """Paused (or its machine suspended) past the limit, it heard nothing meanwhile."""
    hearing = Hearing()
    members = ["a", "b", "c"]
    assert looked_through(hearing, members, 0.0, 3.0, {"a", "b", "c"}) == []
    resumed = 3.0 + max(STALL_S, 2 * AFTER)
    assert hearing.silent(members, resumed, AFTER) == []
    # Then the usual rule: silent after the limit from the resumption.
    assert looked_through(hearing, members, resumed + TICK, resumed + AFTER + 1,
                          {"a", "b"}) == ["c"]  # fmt: skip


def test_a_daemon_that_hears_from_a_minority_takes_nobody_for_lost() -> None:
    """Cut off from most members, it would otherwise take them all for lost."""
    hearing = Hearing()
    members = ["a", "b", "c", "d"]  # five with this daemon: it must hear two others
    assert looked_through(hearing, members, 0.0, AFTER + 1, {"a"}) == []
    hearing = Hearing()
    assert looked_through(hearing, members, 0.0, AFTER + 1, {"a", "b"}) == ["c", "d"]
    hearing = Hearing()
    assert looked_through(hearing, members, 0.0, AFTER + 1, set()) == []
