"""The replica's limits (skueue/replication/settings.py): each has a default, is refused
below its floor, and bounds what it names."""

from __future__ import annotations

import pytest

from skueue.replication.codec import CodecLimits
from skueue.replication.messages import AppendEntries
from skueue.replication.settings import ReplicaSettings
from tests.raft.harness import Group


def test_an_append_carries_at_most_append_entries_max_entries() -> None:
    group = Group(settings=ReplicaSettings(append_entries_max=2, inflight_appends_max=64))
    group.elect("a")
    group.deliver()
    group.propose("a", *(b"%d" % i for i in range(7)))
    group.deliver()
    group.run(1)  # the heartbeat carries the commit index to the followers
    sizes = [len(m.entries) for src, _, m in group.sent
             if src == "a" and isinstance(m, AppendEntries) and m.entries]
    assert sizes and max(sizes) == 2
    assert group.applied_data("b") == [b"%d" % i for i in range(7)]


def test_the_default_is_what_the_codec_takes() -> None:
    assert ReplicaSettings().append_entries_max == CodecLimits().entries_max


@pytest.mark.parametrize("field", ["inflight_appends_max", "append_bytes_max",
                                   "append_entries_max"])
def test_a_limit_below_one_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ReplicaSettings(**{field: 0})  # type: ignore[arg-type]


def test_ticks_must_leave_room_for_heartbeats() -> None:
    with pytest.raises(ValueError, match="heartbeat_ticks < election_ticks"):
        ReplicaSettings(election_ticks=1, heartbeat_ticks=1)
