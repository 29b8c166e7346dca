"""What waits for a member's daemon channel is bounded (``channel_frames_max``), and a
member that left takes its channel with it (runtime/network/daemon_channel.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from skueue.runtime.limits import Limits
from skueue.runtime.network.daemon_channel import DaemonChannels


def channels(frames_max: int, departed: frozenset[str] = frozenset()) -> DaemonChannels:
    """Channels whose members' addresses never arrive: frames only wait."""
    directory = SimpleNamespace(departed=departed, address=lambda _peer: None)
    links: Any = SimpleNamespace(limits=Limits(channel_frames_max=frames_max),
                                 directory=directory)  # fmt: skip
    return DaemonChannels(links)


def test_the_oldest_frames_go_past_channel_frames_max() -> None:
    ch = channels(frames_max=3)
    for qid in range(5):
        ch.send("p", ["stats-query", qid])
    assert [f[1] for f in ch.senders["p"].waiting] == [2, 3, 4]
    assert ch.senders["p"].dropped == 2


def test_a_departed_member_gets_no_channel_and_a_forgotten_one_is_closed() -> None:
    ch = channels(frames_max=8, departed=frozenset({"gone"}))
    ch.send("gone", ["stats-query", 1])
    assert "gone" not in ch.senders
    ch.send("p", ["stats-query", 1])
    sender = ch.senders["p"]
    ch.forget("p")
    assert sender.closed and "p" not in ch.senders and "p" not in ch.unaddressed
