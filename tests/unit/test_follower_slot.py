"""A daemon's follower slot (runtime/follower_slot.py): what the leader appends is on
its disk before it acks, it survives a restart, and its copy stays bounded."""

from __future__ import annotations

from pathlib import Path

from skueue.replication.codec import encode_message
from skueue.replication.config import Config
from skueue.replication.messages import AppendEntries, AppendReply, Entry, Message, Snapshot
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.follower_slot import REPLICAS_DIRECTORY, FollowerSlot
from skueue.runtime.group import ProcessGroup
from skueue.runtime.replicas import DaemonReplicas

CONFIG = Config.of(["P", "b", "c"])
META = Meta("b", "nonce-b", "queue", (), replicas=3)


def open_slot(data_dir: Path, sent: list[tuple[str, Message]]) -> FollowerSlot:
    return FollowerSlot.open(data_dir, "P", "b", CONFIG, lambda to, m: sent.append((to, m)),
                             SyncPolicy(), META)  # fmt: skip


def append(slot: FollowerSlot, prev: int, count: int, commit: int) -> None:
    entries = tuple(Entry(1, "data", b"x" * 200) for _ in range(count))
    prev_term = 1 if prev else 0
    slot.receive("P", AppendEntries(1, prev, prev_term, entries, commit))


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
    assert [e.data for e in again.input_log.read_entries(1, 10, 1 << 20)] == [b"x" * 200] * 10


def test_the_copy_drops_what_is_committed_past_the_snapshot_size(tmp_path: Path) -> None:
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
    slot.close()
    sent.clear()
    again = open_slot(tmp_path, sent)
    assert again.node.snapshot_index == 30 and again.node.last_index == 40
    append(again, 40, 5, commit=45)  # the leader carries on where it was
    again.end_step(0.0)
    assert sent == [("P", AppendReply(1, 45, reject=False))]


def test_a_snapshot_from_the_leader_replaces_the_copy(tmp_path: Path) -> None:
    """A follower behind the leader's last snapshot gets an empty one and goes on from
    there (follower slots apply nothing yet)."""
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
    slot.close()
    again = open_slot(tmp_path, sent)
    assert again.node.snapshot_index == again.node.last_index == 50


def test_a_message_from_outside_the_group_is_dropped(tmp_path: Path) -> None:
    """A member that holds no replica of P (a forged frame, or a placement that
    differs) cannot lead P's copy here."""
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)
    own_log = InputLog.open(tmp_path / "own", Meta("b", "n", "queue", ()), SyncPolicy())
    group = ProcessGroup("b", own_log, Config.of(["b", "c", "P"]), lambda to, m: None)
    replicas = DaemonReplicas("b", group, {"P": slot}, 0.3, 0.0, 1 << 20)
    forged = AppendEntries(7, 0, 0, (Entry(7, "data", b"x"),), 0)
    replicas.receive("x", ["raft", "P", encode_message(forged)])
    assert slot.node.term == 0 and slot.node.last_index == 0
    replicas.receive("P", ["raft", "P", encode_message(forged)])
    assert slot.node.term == 7 and slot.node.last_index == 1
