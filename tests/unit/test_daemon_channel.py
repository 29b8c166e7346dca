"""What waits for a member's daemon channel is bounded (``channel_frames_max``), and a
member that left takes its channel with it (runtime/network/daemon_channel.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import trio

from skueue.runtime.limits import Limits
from skueue.runtime.network.daemon_channel import ALIVE, DaemonChannels, parse_channel_frame


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


def test_replication_frames_are_not_kept_for_a_member_whose_channel_is_down() -> None:
    """Raft takes their loss; kept, they would be stale appends of up to a MiB each.
    Questions and answers wait on as before."""
    ch = channels(frames_max=8)
    ch.send("p", ["raft", "P", ["append"]])
    ch.send("p", ["stats-query", 1])
    sender = ch.senders["p"]
    assert len(sender.waiting) == 2  # not down yet: the first connection takes them
    sender.lost(0.0)
    assert list(sender.waiting) == [["stats-query", 1]]
    for kind, rest in [("raft", [["append"]]), ("acked", [{}]), ("check", [1, "d"]),
                       ("snapshot-part", [1, 1, 0, 1, b"x"])]:  # fmt: skip
        ch.send("p", [kind, "P", *rest])
    ch.send("p", ["stats-query", 2])
    assert list(sender.waiting) == [["stats-query", 1], ["stats-query", 2]]
    # Elections' messages wait: a restarted member's votes must not be lost while its
    # voters' channels to it reconnect.
    for kind in ("vote", "vote_reply", "timeout_now"):
        ch.send("p", ["raft", "P", [kind, 2]])
    assert [f[2][0] for f in list(sender.waiting)[2:]] == ["vote", "vote_reply", "timeout_now"]
    sender.lost(0.0)
    assert len(sender.waiting) == 5
    sender.waiting.clear()
    sender.wake = trio.Event()
    ch.send("p", ["raft", "P", ["append"]])
    assert sender.wake.is_set()  # dropped, but its writer tries to connect again
    sender.down_since = None  # connected again
    ch.send("p", ["raft", "P", ["append"]])
    assert sender.waiting[-1][0] == "raft"


def test_a_word_that_a_member_is_alive_is_not_kept_while_its_channel_is_down() -> None:
    """(runtime/member_silence.py) Kept, it would say so of a time long past."""
    ch = channels(frames_max=8)
    ch.send("p", ALIVE)
    sender = ch.senders["p"]
    assert list(sender.waiting) == [ALIVE]
    sender.lost(0.0)
    ch.send("p", ALIVE)
    assert list(sender.waiting) == []
    assert parse_channel_frame(["alive"]) == ALIVE
