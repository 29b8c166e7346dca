"""Failover's parts (``--failover``; runtime/stand_in.py, runtime/failover.py): a copy
stands for election only with a state, an elected copy steps the tail it inherited, a
deposed leader releases nothing past its commit, and the members' links follow the
leader's word."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from structlog.testing import capture_logs

from skueue.client.errors import ProcessMoved, error_from
from skueue.core.errors import RemoteProtocolError
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.replies import MOVED, UNAVAILABLE, ErrorReply
from skueue.replication.config import Config
from skueue.replication.messages import AppendEntries, Message, RequestVote, VoteReply
from skueue.runtime.applied_state import state_digest
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.failover import served_at, took_over
from skueue.runtime.follower_slot import FollowerSlot
from skueue.runtime.group import ProcessGroup
from skueue.runtime.limits import Limits
from skueue.runtime.network.peers import PeerLinks
from skueue.wire.client_hello import PROTOCOL_VERSION, ClientHello, parse_client_hello
from tests.unit.test_follower_slot import append, inputs, open_slot, stepped


def elect(slot: FollowerSlot, sent: list[tuple[str, Message]]) -> None:
    """Tick ``slot`` until it asks for votes, and grant them."""
    for _ in range(200):
        slot.tick()
        slot.end_step(0.0)
        asks = [(to, m) for to, m in sent if isinstance(m, RequestVote)]
        if asks:
            break
    else:
        raise AssertionError("the copy never stood for election")
    for to, ask in asks:
        slot.receive(to, VoteReply(ask.term, granted=True, pre_vote=ask.pre_vote))
    slot.end_step(0.0)
    asks = [(to, m) for to, m in sent if isinstance(m, RequestVote) and not m.pre_vote]
    for to, ask in asks:
        slot.receive(to, VoteReply(ask.term, granted=True, pre_vote=False))
    slot.end_step(0.0)


def test_a_copy_stands_only_with_failover(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 6, commit=6)
    slot.end_step(0.0)
    slot.failover = False
    for _ in range(100):
        slot.tick()
        slot.end_step(0.0)
    assert not any(isinstance(m, RequestVote) for _, m in sent)
    slot.failover = True
    elect(slot, sent)
    assert slot.elected


def test_a_copy_without_a_state_never_stands(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 6, commit=6)
    slot.end_step(0.0)
    slot.state, slot.failover = None, True
    for _ in range(100):
        slot.tick()
        slot.end_step(0.0)
    assert not any(isinstance(m, RequestVote) for _, m in sent)


def test_an_elected_copy_steps_the_tail_it_inherited(tmp_path: Path) -> None:
    """Entries past the commit (the last leader's tail) are stepped before the copy
    serves: its ``took_over`` entry commits them, and the host must hold them."""
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 30, commit=20)
    slot.end_step(0.0)
    assert slot.state is not None and slot.state.applied == 20
    slot.failover = True
    elect(slot, sent)
    state = slot.take_the_lead()
    assert state.applied == slot.node.last_index == 31  # 30 entries and its took_over
    host, numbered = stepped(inputs(30))
    assert state.digest() == state_digest(host, {}, numbered)


def test_a_deposed_leader_releases_nothing_past_its_commit(tmp_path: Path) -> None:
    """Once another replica may lead, what this one stepped after its commit may be
    overwritten and committed as other entries at the same indexes: none of its steps
    held there goes out, and it never stands again."""
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 10, commit=10)
    slot.end_step(0.0)
    slot.failover = True
    elect(slot, sent)
    group = ProcessGroup.taking_over(slot)
    assert group.leading and group.releasable == group.node.commit
    commit, last, term = group.node.commit, group.node.last_index, group.node.term
    assert commit < last  # its took_over entry is not committed yet
    with capture_logs() as logs:
        # A newer leader's append commits through this replica's last index.
        group.receive("c", AppendEntries(term + 1, last, term, (), last))
    assert group.node.commit == last
    assert group.deposed.is_set() and group.releasable == commit
    assert not group.node.settings.campaigns
    assert any("another replica may lead" in e["event"] for e in logs)


def test_a_home_that_follows_another_leader_releases_nothing_of_its_replay(
    tmp_path: Path,
) -> None:
    """A home that never led in this life and hears of another leader: the frames its
    replay made are the new leader's to send (it releases nothing), and it is a backup."""
    log = InputLog.open(tmp_path, Meta("P", "n", "queue", ()), SyncPolicy())
    group = ProcessGroup("P", log, Config.of(["P", "b", "c"]), lambda to, m: None)
    group.failover = True
    backups: list[bool] = []
    group.on_deposed = lambda: backups.append(True)
    group.receive("c", AppendEntries(5, 0, 0, (), 0))
    assert backups == [True] and group.releasable == 0


def links(directory: Directory) -> PeerLinks:
    return PeerLinks("me", Address("127.0.0.1", 1), Limits(), SimpleNamespace(), directory)  # type: ignore[arg-type]


def test_a_link_goes_where_the_newest_leader_said() -> None:
    directory = Directory("me", Address("127.0.0.1", 1))
    directory.learn("P", Address("127.0.0.1", 2))
    peers = links(directory)
    home = Address("127.0.0.1", 2)
    assert peers.where("P", home) == home
    peers.relocate("P", 3, Address("127.0.0.1", 9))
    assert peers.where("P", home) == Address("127.0.0.1", 9)
    peers.relocate("P", 2, Address("127.0.0.1", 8))  # an older term's word is stale
    assert peers.where("P", home) == Address("127.0.0.1", 9)
    peers.relocate("P", 4, home)  # back home
    assert peers.where("P", home) == home


@pytest.mark.trio
async def test_a_relocation_restarts_a_link_at_the_old_address() -> None:
    directory = Directory("me", Address("127.0.0.1", 1))
    peers = links(directory)
    old, new = Address("127.0.0.1", 2), Address("127.0.0.1", 9)
    trying, connected = trio.CancelScope(), trio.CancelScope()
    peers.connecting["P"], peers.serving["Q"] = (trying, old), (connected, new)
    peers.relocate("P", 1, new)
    peers.relocate("Q", 1, new)  # connected there already: left alone
    assert trying.cancel_called and not connected.cancel_called
    peers.relocate("Q", 2, old)
    assert connected.cancel_called


@pytest.mark.parametrize(
    "frame",
    [["leader", 7, 1, "127.0.0.1:9"], ["leader", "P", -1, "127.0.0.1:9"],
     ["leader", "P", "1", "127.0.0.1:9"], ["leader", "P", 1, 9], ["leader", "P", 1, "nowhere"]],
)  # fmt: skip
def test_a_bad_leader_frame_is_the_senders_fault(frame: list[Any]) -> None:
    dropped: list[str] = []
    relocated: list[Any] = []
    moves = SimpleNamespace(relocate=lambda *a: relocated.append(a))
    ctx = SimpleNamespace(process_id="me", drop_channel_session=dropped.append, links=moves)
    owner: Any = SimpleNamespace(ctx=ctx)
    took_over(owner, "b", frame)
    assert dropped == ["b"] and relocated == []


def test_a_leader_frame_moves_the_link_and_is_kept_for_the_own_process() -> None:
    """(A home that is a backup tells its clients where its process is served.)"""
    relocated: list[Any] = []
    moves = SimpleNamespace(relocate=lambda *a: relocated.append(a))
    ctx = SimpleNamespace(process_id="me", drop_channel_session=None, links=moves)
    owner: Any = SimpleNamespace(ctx=ctx)
    took_over(owner, "b", ["leader", "P", 3, "127.0.0.1:9"])
    took_over(owner, "b", ["leader", "me", 4, "127.0.0.1:8"])
    assert relocated == [("P", 3, Address("127.0.0.1", 9)), ("me", 4, Address("127.0.0.1", 8))]


def test_a_hello_names_its_sessions_process() -> None:
    hello = ClientHello(PROTOCOL_VERSION, None, False, "s", None, "P")
    assert parse_client_hello(hello.frame()) == hello
    for bad in (7, "", "x" * 257):
        frame = ["hello-client", PROTOCOL_VERSION, {"process": bad}]
        with pytest.raises(RemoteProtocolError, match="process must be"):
            parse_client_hello(frame)


def test_a_member_tells_a_session_where_its_process_is_served() -> None:
    directory = Directory("me", Address("127.0.0.1", 1))
    peers = links(directory)
    ctx: Any = SimpleNamespace(links=peers)
    assert served_at(ctx, "P") == ("no member is known to serve P now", UNAVAILABLE)
    peers.relocate("P", 2, Address("127.0.0.1", 9))
    assert served_at(ctx, "P") == ("127.0.0.1:9", MOVED)
    error = error_from(ErrorReply(None, *served_at(ctx, "P")), "me")
    assert isinstance(error, ProcessMoved) and error.address == "127.0.0.1:9"


def test_stats_say_who_serves_which_process() -> None:
    from skueue.cli.stats_format import _failover

    assert _failover({}) == ""
    assert _failover({"led_by": "b", "stands_in_for": {}}) == (
        "its process led by b (a backup of it), ")
    assert _failover({"stands_in_for": {"P": "127.0.0.1:9"}}) == (
        "stands in for P (at 127.0.0.1:9), ")
