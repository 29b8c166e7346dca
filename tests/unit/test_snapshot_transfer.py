"""A leader's last snapshot sent to a follower behind it (runtime/snapshot_transfer.py):
the follower's copy takes the leader's state and applies on from there; what is not a
state is refused without a crash; a state too large for a frame is not sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest

from skueue.core.errors import RemoteProtocolError
from skueue.core.ops import Structure
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.replication.messages import AppendEntries, Snapshot
from skueue.runtime.applied_state import state_digest
from skueue.runtime.durability.entry_store import SnapshotEntryStore
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.durability.snapshots import capture_state
from skueue.runtime.limits import Limits
from skueue.runtime.network.link_sender import LinkSender
from skueue.runtime.new_host import new_host
from skueue.runtime.snapshot_transfer import SnapshotShipper, transfer_of_last_snapshot
from skueue.wire.snapshot_codec import encode_state
from tests.unit.test_follower_slot import (
    CONFIG,
    LIMITS,
    entries_of,
    inputs,
    open_slot,
    replicas_of,
)

FRAME = 16 * 1024 * 1024


class Leader:
    """P's daemon, as far as a transfer reads it: its host, its store, its links, its
    log with the snapshots it takes."""

    def __init__(self, directory: Path) -> None:
        self.store = SnapshotEntryStore(directory / "entries", 1 << 20, 2)
        # A ring of P alone, so that its inputs store elements in its own tables (the
        # follower's copy takes the state whole, whatever it held before).
        alone = Directory("P", Address("127.0.0.1", 1))
        self.host: Host = new_host("P", alone, ["P"], Structure.QUEUE, Limits(), self.store)
        self.senders: dict[str, LinkSender] = {}
        self.log = InputLog.open(directory, Meta("P", "n", "queue", ()), SyncPolicy())
        self.stepped = 0

    def step(self, count: int) -> None:
        for item in inputs(count, self.stepped):
            self.host.step(item)  # its frames are not compared here (test_follower_slot.py)
        self.stepped += count

    def snapshot(self) -> None:
        self.store.before_snapshot()
        host, store, senders = self.host, self.store, self.senders
        self.log.snapshot(lambda f: capture_state(f, host, {}, senders, store),
                          self.stepped, 1, CONFIG)  # fmt: skip
        self.store.after_snapshot()

    def digest(self) -> str:
        return state_digest(self.host, {}, {})


def test_a_follower_behind_the_snapshot_takes_the_leaders_state(tmp_path: Path) -> None:
    leader = Leader(tmp_path / "leader")
    leader.step(30)
    assert len(leader.store) > 0, "no element to send: the test would prove nothing"
    leader.snapshot()
    at_snapshot = leader.digest()
    leader.step(6)  # removes after the snapshot: their elements stay readable until the next
    data = transfer_of_last_snapshot(leader.log, leader.store, FRAME)
    assert data
    slot = open_slot(tmp_path / "follower", [])
    slot.receive("P", AppendEntries(1, 0, 0, entries_of(inputs(3)), 0))  # an older copy
    slot.end_step(0.0)
    slot.receive("P", Snapshot(1, 30, 1, CONFIG, data))
    slot.end_step(0.0)
    state = slot.state
    assert state is not None and state.applied == 30
    assert state_digest(state.host, {}, {}) == at_snapshot
    # It applies on from there as the leader stepped on.
    slot.receive("P", AppendEntries(1, 30, 1, entries_of(inputs(6, 30)), 36))
    slot.end_step(0.0)
    assert state.applied == 36 and state_digest(state.host, {}, {}) == leader.digest()
    # And its own snapshot of it comes back after a restart.
    slot.compact_if_due(1)
    slot.close()
    again = open_slot(tmp_path / "follower", [])
    assert again.state is not None and state_digest(again.state.host, {}, {}) == leader.digest()


def test_what_is_not_a_state_leaves_the_copy_without_one(tmp_path: Path) -> None:
    slot = open_slot(tmp_path, [])
    slot.receive("P", AppendEntries(1, 0, 0, entries_of(inputs(9)), 9))
    slot.end_step(0.0)
    assert slot.state is not None
    for index, data in enumerate([b"not msgpack \xc1", msgpack.packb([1, 2]),
                                  encode_state(["a list", [], {}, {}])], 1):  # fmt: skip
        slot.receive("P", Snapshot(1, 10 * index, 1, CONFIG, data))
        slot.end_step(0.0)
        assert slot.state is None and slot.node.snapshot_index == 10 * index
    assert len(slot.store) == 0  # nothing of what was decoded stays


def test_a_state_over_the_transfer_limit_is_not_sent(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.step(30)
    leader.snapshot()
    data = transfer_of_last_snapshot(leader.log, leader.store, FRAME)
    assert transfer_of_last_snapshot(leader.log, leader.store, len(data)) == data
    assert transfer_of_last_snapshot(leader.log, leader.store, len(data) - 1) == b""


def ship(leader: Leader, chunk_bytes: int) -> list[tuple[str, Any]]:
    """What the leader sends ``b`` for its last snapshot, in parts of ``chunk_bytes``."""
    sent: list[tuple[str, Any]] = []
    limits = Limits(snapshot_chunk_bytes=chunk_bytes)
    shipper = SnapshotShipper("P", leader.log, leader.store, limits,
                              lambda to, frame: sent.append((to, frame)))  # fmt: skip
    shipper.ship("b", Snapshot(1, leader.stepped, 1, CONFIG, b""),
                 lambda to, message: sent.append((to, message)))  # fmt: skip
    return sent


def test_a_large_state_goes_in_parts_and_is_taken_once_whole(tmp_path: Path) -> None:
    leader = Leader(tmp_path / "leader")
    leader.step(30)
    leader.snapshot()
    sent = ship(leader, 1024)
    *parts, (_, message) = sent
    assert len(parts) > 2 and all(to == "b" and f[0] == "snapshot-part" for to, f in parts)
    assert isinstance(message, Snapshot) and message.data == b""
    slot = open_slot(tmp_path / "follower", [])
    replicas = replicas_of(tmp_path, slot)
    slot.receive("P", AppendEntries(1, 0, 0, entries_of(inputs(3)), 0))  # the leader known
    slot.end_step(0.0)
    for _, frame in parts:
        replicas.receive("P", frame)
    assert slot.assembly is not None and slot.assembly.whole
    slot.receive("P", message)
    slot.end_step(0.0)
    assert slot.state is not None and slot.state.applied == 30
    assert state_digest(slot.state.host, {}, {}) == leader.digest()


def test_a_snapshot_whose_parts_are_not_whole_is_dropped(tmp_path: Path) -> None:
    """A part lost (with a connection, say): the message is not stepped, the copy is as
    it was, and the leader sends the snapshot again after its timeout."""
    leader = Leader(tmp_path / "leader")
    leader.step(30)
    leader.snapshot()
    *parts, (_, message) = ship(leader, 1024)
    slot = open_slot(tmp_path / "follower", [])
    replicas = replicas_of(tmp_path, slot)
    slot.receive("P", AppendEntries(1, 0, 0, entries_of(inputs(3)), 3))
    slot.end_step(0.0)
    before = slot.state
    for _, frame in [parts[0], *parts[2:]]:  # the second part lost
        replicas.receive("P", frame)
    assert slot.assembly is None
    for _, frame in parts[:-1]:  # the last part lost
        replicas.receive("P", frame)
    assert slot.assembly is not None and not slot.assembly.whole
    slot.receive("P", message)
    slot.end_step(0.0)
    assert slot.node.snapshot_index == 0 and slot.state is before and slot.assembly is None


@pytest.mark.parametrize("fields", [
    ["1", 30, 0, 10, b"x"], [1, 30, 0, 10, "x"], [1, 30, -1, 10, b"x"], [1, 30, 8, 10, b"xyz"],
    [1, 30, 0, LIMITS.snapshot_transfer_bytes_max + 1, b"x"],
])  # fmt: skip
def test_a_malformed_part_is_the_senders_fault(tmp_path: Path, fields: list[Any]) -> None:
    slot = open_slot(tmp_path, [])
    replicas = replicas_of(tmp_path, slot)
    slot.receive("P", AppendEntries(1, 0, 0, entries_of(inputs(3)), 3))
    slot.end_step(0.0)
    with pytest.raises(RemoteProtocolError):
        replicas.receive("P", ["snapshot-part", "P", *fields])
    assert slot.assembly is None


def test_parts_fit_half_a_frame_whatever_snapshot_chunk_bytes_says(tmp_path: Path) -> None:
    leader = Leader(tmp_path)
    leader.step(30)
    leader.snapshot()
    sent: list[Any] = []
    limits = Limits(snapshot_chunk_bytes=1 << 20, frame_bytes_max=4096)
    shipper = SnapshotShipper("P", leader.log, leader.store, limits,
                              lambda to, frame: sent.append(frame))  # fmt: skip
    shipper.ship("b", Snapshot(1, 30, 1, CONFIG, b""), lambda to, m: sent.append(m))
    *parts, message = sent
    assert len(parts) > 1 and all(len(p[6]) <= 2048 for p in parts)
    assert isinstance(message, Snapshot) and message.data == b""


def test_snapshot_chunk_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="snapshot_chunk_bytes"):
        Limits(snapshot_chunk_bytes=0)
