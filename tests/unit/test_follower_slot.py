"""A daemon's follower slot (runtime/follower_slot.py): what the leader appends is on
its disk before it acks, it survives a restart, its copy stays bounded, and what is
committed is applied to the process's state as the leader stepped it
(runtime/applied_state.py), checked against the leader's digests."""

from __future__ import annotations

import math
import tempfile
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgpack
import pytest
from structlog.testing import capture_logs

from skueue.core.effects import Send
from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import Structure
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.host.inputs import FromClient, Input, Tick
from skueue.host.requests import InsertRequest, RemoveRequest
from skueue.replication.codec import encode_message
from skueue.replication.config import Config
from skueue.replication.messages import AppendEntries, AppendReply, Entry, Message, Snapshot
from skueue.runtime import follower_slot
from skueue.runtime.applied_state import state_digest
from skueue.runtime.durability.entry_store import SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.durability.records import record_of
from skueue.runtime.follower_slot import REPLICAS_DIRECTORY, FollowerSlot
from skueue.runtime.group import ProcessGroup
from skueue.runtime.limits import Limits
from skueue.runtime.network.daemon_channel import parse_channel_frame
from skueue.runtime.new_host import new_host
from skueue.runtime.replicas import DaemonReplicas

MEMBERS = ["P", "b", "c"]
CONFIG = Config.of(MEMBERS)
META = Meta("b", "nonce-b", "queue", (), replicas=3)
LIMITS = Limits()


def make_host(store: SnapshotEntryStore | None) -> Host:
    directory = Directory("P", Address("127.0.0.1", 1))
    for port, peer in enumerate(["b", "c"], 2):
        directory.learn(peer, Address("127.0.0.1", port))
    return new_host("P", directory, MEMBERS, Structure.QUEUE, LIMITS, store)


def open_slot(data_dir: Path, sent: list[tuple[str, Message]]) -> FollowerSlot:
    return FollowerSlot.open(data_dir, "P", "b", CONFIG, lambda to, m: sent.append((to, m)),
                             SyncPolicy(), META, make_host, LIMITS)  # fmt: skip


def inputs(count: int, start: int = 0) -> list[Input]:
    """A client's inserts and removes at P, and ticks that carry them up the tree."""
    out: list[Input] = []
    for n in range(start, start + count):
        if n % 3 == 0:
            request: Any = InsertRequest(n, (b"v%d" % n, b"w%d" % n), None, None, None, None)
            out.append(FromClient(1, "s", request, math.inf, 0.0))
        elif n % 3 == 1:
            request = RemoveRequest(n, 1, None, None, None, None, None, None, False, False)
            out.append(FromClient(1, "s", request, math.inf, 0.0))
        else:
            out.append(Tick())
    return out


def entries_of(items: list[Input]) -> tuple[Entry, ...]:
    packer = msgpack.Packer(use_bin_type=True)
    return tuple(Entry(1, "data", packer.pack(record_of(i))) for i in items)


def append(slot: FollowerSlot, prev: int, count: int, commit: int) -> None:
    prev_term = 1 if prev else 0
    entries = entries_of(inputs(count, prev))
    slot.receive("P", AppendEntries(1, prev, prev_term, entries, commit))


def stepped(items: list[Input]) -> tuple[Host, dict[str, int]]:
    """The leader's side: a host stepped with ``items`` (its elements in an entry store
    of its own, as a durable daemon's), and the frames it numbered for each peer."""
    host = make_host(SnapshotEntryStore(Path(tempfile.mkdtemp()), 1 << 20, 2))
    numbered: dict[str, int] = defaultdict(int)
    for item in items:
        for effect in host.step(item):
            if isinstance(effect, Send):
                numbered[effect.to.process] += 1
    return host, numbered


def test_acks_leave_after_the_sync_and_the_copy_survives_a_restart(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 10, commit=0)
    assert sent == []  # not before the step's sync
    slot.end_step(0.0)
    assert sent == [("P", AppendReply(1, 10, reject=False))]
    slot.close()
    again = open_slot(tmp_path, sent)
    assert again.node.last_index == 10 and again.node.term == 1
    assert again.input_log.read_entries(1, 10, 1 << 20) == list(entries_of(inputs(10)))


def test_committed_entries_are_applied_as_the_leader_stepped_them(tmp_path: Path) -> None:
    """The state after the committed entries is the leader's: the same host, tables and
    frames numbered per peer (the digest a leader's check carries); nothing beyond the
    commit is applied."""
    slot = open_slot(tmp_path, [])
    append(slot, 0, 30, commit=20)
    slot.end_step(0.0)
    state = slot.state
    assert state is not None and state.applied == 20
    host, numbered = stepped(inputs(20))
    assert sum(numbered.values()) > 0, "the inputs made no frames: nothing is compared"
    assert {p: link.next_number - 1 for p, link in state.outboxes.items()} == numbered
    assert state.digest() == state_digest(host, {}, numbered)
    assert state.digest() != state_digest(stepped(inputs(22))[0], {}, numbered)  # one more insert


def test_a_check_passes_where_the_state_is_the_leaders_and_drops_it_where_not(
    tmp_path: Path,
) -> None:
    slot = open_slot(tmp_path, [])
    host, numbered = stepped(inputs(12))
    slot.check(12, state_digest(host, {}, numbered))  # before the copy gets there
    append(slot, 0, 30, commit=30)
    slot.end_step(0.0)
    assert (slot.checked, slot.diverged) == (1, 0)
    assert slot.stats()["applied"] == 30
    slot.check(30, "not the leader's digest")
    assert (slot.checked, slot.diverged) == (1, 1)
    assert slot.state is None and slot.stats()["applied"] is None
    append(slot, 30, 5, commit=35)  # the copy of the log goes on, and still counts
    slot.end_step(0.0)
    assert slot.node.last_index == 35


def test_the_leaders_watermarks_trim_the_outboxes(tmp_path: Path) -> None:
    """What the peers acknowledged to the leader leaves the follower's outboxes, also
    when the watermark comes before the copy has applied that far."""
    slot = open_slot(tmp_path / "one", [])
    append(slot, 0, 30, commit=30)
    slot.end_step(0.0)
    assert slot.state is not None
    link = slot.state.outboxes["b"]
    assert (link.next_number, link.unacknowledged()) == (2, 1)
    slot.acknowledged({"b": 0, "c": 3})
    assert link.unacknowledged() == 1
    slot.acknowledged({"b": 1})
    assert (link.next_number, link.unacknowledged()) == (2, 0)
    ahead = open_slot(tmp_path / "two", [])
    ahead.acknowledged({"b": 5})  # the leader's peers are ahead of this copy
    append(ahead, 0, 30, commit=30)
    ahead.end_step(0.0)
    assert ahead.state is not None
    link = ahead.state.outboxes["b"]
    assert (link.next_number, link.unacknowledged()) == (2, 0)


def test_the_copy_snapshots_its_state_past_the_snapshot_size(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 40, commit=30)
    slot.end_step(0.0)
    slot.compact_if_due(1 << 20)  # not due: the log is small
    assert slot.node.snapshot_index == 0
    slot.compact_if_due(1024)
    directory = tmp_path / REPLICAS_DIRECTORY / "P"
    assert slot.node.snapshot_index == 30 and (directory / "snapshot.bin").exists()
    assert len(list(directory.glob("*.log"))) == 1
    assert slot.state is not None
    digest = slot.state.digest()
    slot.close()
    sent.clear()
    again = open_slot(tmp_path, sent)
    assert again.node.snapshot_index == 30 and again.node.last_index == 40
    assert again.state is not None and again.state.applied == 30
    assert again.state.digest() == digest
    append(again, 40, 5, commit=45)  # the leader carries on where it was
    again.end_step(0.0)
    assert sent == [("P", AppendReply(1, 45, reject=False))]
    host, numbered = stepped(inputs(45))
    assert again.state.applied == 45 and again.state.digest() == state_digest(host, {}, numbered)


def test_a_snapshot_from_the_leader_replaces_the_copy_without_a_state(tmp_path: Path) -> None:
    """A follower behind the leader's last snapshot gets an empty one and goes on from
    there; a leader's snapshot carries no state yet, so the copy has none after it,
    also after a restart."""
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    append(slot, 0, 10, commit=0)
    slot.end_step(0.0)
    sent.clear()
    slot.receive("P", Snapshot(1, 50, 1, CONFIG, b""))
    assert sent == []  # the ack waits for the install to be durable
    slot.end_step(0.0)
    assert sent == [("P", AppendReply(1, 50, reject=False))]
    assert slot.node.snapshot_index == slot.node.last_index == 50
    assert slot.state is None
    slot.close()
    again = open_slot(tmp_path, sent)
    assert again.node.snapshot_index == again.node.last_index == 50
    assert again.state is None and again.stats()["applied"] is None


def replicas_of(tmp_path: Path, slot: FollowerSlot) -> DaemonReplicas:
    own_log = InputLog.open(tmp_path / "own", Meta("b", "n", "queue", ()), SyncPolicy())
    group = ProcessGroup("b", own_log, Config.of(["b", "c", "P"]), lambda to, m: None)
    # Neither is used by what the tests send: the daemon's channels and links, as far
    # as the replicas read them.
    channels: Any = SimpleNamespace(send=lambda to, frame: None)
    links: Any = SimpleNamespace(senders={})
    return DaemonReplicas("b", group, {"P": slot}, channels, links, LIMITS, 0.0)


def test_a_message_from_outside_the_group_is_dropped(tmp_path: Path) -> None:
    """A member that holds no replica of P (a forged frame, or a placement that
    differs) cannot lead P's copy here."""
    slot = open_slot(tmp_path, [])
    replicas = replicas_of(tmp_path, slot)
    forged = AppendEntries(7, 0, 0, entries_of([Tick()]), 0)
    replicas.receive("x", ["raft", "P", encode_message(forged)])
    assert slot.node.term == 0 and slot.node.last_index == 0
    replicas.receive("P", ["raft", "P", encode_message(forged)])
    assert slot.node.term == 7 and slot.node.last_index == 1


def test_checks_and_watermarks_come_only_from_the_leader(tmp_path: Path) -> None:
    slot = open_slot(tmp_path, [])
    replicas = replicas_of(tmp_path, slot)
    append(slot, 0, 9, commit=9)
    slot.end_step(0.0)
    replicas.receive("c", ["check", "P", 9, "from a follower"])  # c is no leader
    assert (slot.checked, slot.diverged) == (0, 0)
    host, numbered = stepped(inputs(9))
    replicas.receive("P", ["check", "P", 9, state_digest(host, {}, numbered)])
    assert (slot.checked, slot.diverged) == (1, 0)


@pytest.mark.parametrize("frame", [
    ["acked", "P", {"b": -1}], ["acked", "P", {"b": "1"}], ["acked", "P", [1]],
    ["acked", "P", {3: 1}], ["check", "P", "9", "digest"], ["check", "P", 9, b"digest"],
])  # fmt: skip
def test_a_malformed_leader_frame_is_the_senders_fault(tmp_path: Path, frame: list[Any]) -> None:
    """It raises the error that closes the sender's channel (runtime/replicas.py), and
    changes nothing."""
    slot = open_slot(tmp_path, [])
    replicas = replicas_of(tmp_path, slot)
    append(slot, 0, 9, commit=9)
    slot.end_step(0.0)
    with pytest.raises(RemoteProtocolError):
        replicas.receive("P", frame)
    assert (slot.checked, slot.diverged, slot.state is not None) == (0, 0, True)


@pytest.mark.parametrize("frame", [["acked", 5, {}], ["check", None, 1, "d"], ["check", "P", 1]])
def test_replication_frames_are_checked_for_their_shape(frame: list[Any]) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_channel_frame(frame)


def test_a_copy_far_behind_catches_up_over_several_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each owner step applies at most APPLY_STEP_BYTES of entries, so that a copy that
    restarts far behind does not hold up its daemon's own process in one step."""
    monkeypatch.setattr(follower_slot, "APPLY_STEP_BYTES", 200)
    slot = open_slot(tmp_path, [])
    append(slot, 0, 30, commit=30)
    slot.end_step(0.0)
    state = slot.state
    assert state is not None and 0 < state.applied < 30
    steps = 1
    while state.applied < 30 and steps < 100:
        slot.end_step(0.0)  # nothing new: the ticks' steps go on applying
        steps += 1
    host, numbered = stepped(inputs(30))
    assert steps > 2 and state.digest() == state_digest(host, {}, numbered)


def test_a_copy_whose_elements_are_damaged_keeps_the_log_without_a_state(tmp_path: Path) -> None:
    """Its daemon starts and serves all the same: only the copy is hurt."""
    slot = open_slot(tmp_path, [])
    slot.receive("P", AppendEntries(1, 0, 0, entries_of(inputs(30)), 30))
    slot.end_step(0.0)
    assert slot.state is not None
    # A state whose tables name an element the store does not hold.
    slot.state.host.process.nodes[next(iter(slot.state.host.process.nodes))].store.table(
        "q").put(1, b"kept")  # fmt: skip
    slot.compact_if_due(1)
    slot.close()
    for page in (tmp_path / REPLICAS_DIRECTORY / "P" / "entries").glob("*"):
        page.unlink()  # the copy's elements are gone
    with capture_logs() as logs:
        again = open_slot(tmp_path, [])
    assert again.state is None and again.node.snapshot_index == 30
    assert any(e["event"].startswith("a replica's elements are damaged") for e in logs), logs


def test_a_leader_checks_only_states_up_to_replica_check_elements_max(tmp_path: Path) -> None:
    """The digest walks the whole state, a pause of the leader: larger states go
    unchecked."""
    own_log = InputLog.open(tmp_path / "own", Meta("P", "n", "queue", ()), SyncPolicy())
    group = ProcessGroup("P", own_log, CONFIG, lambda to, m: None)
    sent: list[tuple[str, list[Any]]] = []
    channels: Any = SimpleNamespace(send=lambda to, frame: sent.append((to, frame)))
    links: Any = SimpleNamespace(senders={})
    limits = Limits(replica_check_elements_max=4)
    replicas = DaemonReplicas("P", group, {}, channels, links, limits, 0.0)
    large: Any = SimpleNamespace(process=SimpleNamespace(entries=lambda: 5))
    replicas.send_check(7, large, {})
    assert sent == []
    replicas.send_check(7, make_host(None), {})  # no element: checked
    assert sorted(to for to, _ in sent) == ["b", "c"]
    assert all(frame[:3] == ["check", "P", 7] for _, frame in sent)


def test_a_copy_found_empty_at_a_restart_does_not_count_until_it_caught_up(
    tmp_path: Path,
) -> None:
    """Its daemon's own log held something, so this copy may have acked entries it lost
    (a restore from copies, or ``replicas/`` deleted): the amnesia guard (I6).  Its
    answers do not count, which makes the leader start it over instead of taking its
    refusals for late answers; it counts again once it holds the leader's commit."""
    first = FollowerSlot.open(tmp_path / "first", "P", "b", CONFIG, lambda to, m: None,
                              SyncPolicy(), META, make_host, LIMITS, restart=False)  # fmt: skip
    assert not first.node.may_have_forgotten  # a first start: nothing acked before
    sent: list[tuple[str, Message]] = []
    slot = FollowerSlot.open(tmp_path / "lost", "P", "b", CONFIG,
                             lambda to, m: sent.append((to, m)), SyncPolicy(), META,
                             make_host, LIMITS, restart=True)  # fmt: skip
    try:
        assert slot.node.may_have_forgotten
        slot.receive("P", AppendEntries(1, 40, 1, (), 40))  # the leader thought it held 40
        slot.end_step(0.0)
        (_, refusal), = sent
        assert isinstance(refusal, AppendReply) and refusal.reject and not refusal.counts
        append(slot, 0, 6, commit=6)
        slot.end_step(0.0)
        assert not slot.node.may_have_forgotten  # it holds the leader's commit
        assert isinstance(sent[-1][1], AppendReply) and sent[-1][1].counts
    finally:
        first.close()
        slot.close()
    again = FollowerSlot.open(tmp_path / "lost", "P", "b", CONFIG, lambda to, m: None,
                              SyncPolicy(), META, make_host, LIMITS, restart=True)  # fmt: skip
    assert not again.node.may_have_forgotten  # not empty any more
    again.close()
