"""The write-ahead log of inputs (runtime/durability/input_log.py): records come back whole, a torn
tail is cut, and a directory of another process or version is refused.  Its records are
the entries of the process's replicated log (runtime/durability/log_index.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pytest

from skueue.replication.config import Config
from skueue.replication.messages import Entry
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.durability.log_index import LogIndex, base_record, entry_record
from skueue.runtime.durability.snapshot_file import open_snapshot
from skueue.runtime.errors import DaemonError

META = Meta("p1", "nonce-1", "queue", ())
ALONE = Config.of(["p1"])


def append(log: InputLog, *records: Any, term: int = 1) -> None:
    """Log each record as the next data entry of ``term``."""
    packed = [Entry(term, "data", msgpack.packb(r)) for r in records]
    log.write_entries(log.index.last_index + 1, packed)


def test_records_come_back_in_order_with_the_first_nonce(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    append(log, ["t"], ["i", "s", 1, [b"x"]])
    log.sync(0.0)
    log.close()
    again = InputLog.open(tmp_path, Meta("p1", "nonce-2", "queue", ()), SyncPolicy())
    assert list(again.records()) == [["t"], ["i", "s", 1, [b"x"]]]
    assert again.meta.nonce == "nonce-1"  # the incarnation the peers know


def test_a_torn_tail_is_cut_and_never_replayed(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    for i in range(3):
        append(log, ["r", None, i, 1])
    log.sync(0.0)
    log.close()
    path = tmp_path / "inputs-00000000.log"
    whole = path.read_bytes().rstrip(b"\0")  # the records, without the allocated rest
    path.write_bytes(whole[:-3])  # the last record torn
    assert list(InputLog.open(tmp_path, META, SyncPolicy()).records()) == [
        ["r", None, 0, 1], ["r", None, 1, 1]
    ]
    assert path.stat().st_size < len(whole) - 3  # cut off the file, too
    data = bytearray(path.read_bytes())
    data[-2] ^= 0xFF  # a corrupt byte in the last record
    path.write_bytes(bytes(data))
    assert list(InputLog.open(tmp_path, META, SyncPolicy()).records()) == [["r", None, 0, 1]]


def test_a_static_members_cluster_is_recorded_for_its_restarts(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.record_members(["p1", "p3", "p2"], [("p3", "10.0.0.3:7400"), ("p2", "10.0.0.2:7400")])
    again = InputLog.open(tmp_path, META, SyncPolicy()).meta
    assert again.members == ("p1", "p2", "p3")
    assert again.addresses == (("p2", "10.0.0.2:7400"), ("p3", "10.0.0.3:7400"))


def test_the_peers_incarnations_are_kept_for_the_restarts(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.record_incarnation("p2", "n2")
    log.record_incarnation("p3", "n3")
    log.record_incarnation("p2", "n2")  # known already: nothing changes
    again = InputLog.open(tmp_path, META, SyncPolicy()).meta
    assert again.incarnations == (("p2", "n2"), ("p3", "n3"))
    assert again.nonce == META.nonce  # the daemon's own incarnation is apart


def test_the_hosts_lost_for_good_are_kept_for_the_restarts(tmp_path: Path) -> None:
    """(runtime/re_replication.py: a leader that restarts goes on replacing them.)"""
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.record_lost(["p3"])
    log.record_lost(["p2", "p3"])
    assert InputLog.open(tmp_path, META, SyncPolicy()).meta.lost == ("p2", "p3")


def test_another_process_or_version_is_refused(tmp_path: Path) -> None:
    InputLog.open(tmp_path, META, SyncPolicy())
    with pytest.raises(DaemonError, match="holds the data of process 'p1'"):
        InputLog.open(tmp_path, Meta("p9", "n", "queue", ()), SyncPolicy())
    raw = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**raw, "version": 99}))
    with pytest.raises(DaemonError, match="another version of skueued"):
        InputLog.open(tmp_path, META, SyncPolicy())


def test_a_directory_of_the_per_position_placement_is_refused(tmp_path: Path) -> None:
    """Version 10 logs were written when every position had its own DHT key; replayed
    with keys by blocks (issue 30) their peer messages would reach other owners."""
    InputLog.open(tmp_path, META, SyncPolicy())
    raw = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**raw, "version": 10}))
    with pytest.raises(DaemonError, match="version 10; this one reads .* version 12") as e:
        InputLog.open(tmp_path, META, SyncPolicy())
    assert "\n" not in str(e.value) and "empty directory" in str(e.value)


def test_sync_policies_parse_and_bad_ones_are_refused() -> None:
    assert SyncPolicy.parse("always") == SyncPolicy.parse("batch") == SyncPolicy("batch")
    assert SyncPolicy.parse("interval=250") == SyncPolicy("interval", 0.25)
    assert SyncPolicy.parse("never").mode == "never"
    for bad in ("sometimes", "interval=", "interval=-5", "interval=x"):
        with pytest.raises(ValueError, match="--fsync"):
            SyncPolicy.parse(bad)


def test_a_snapshot_replaces_the_log_before_it(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.save_hard_state(1, "p1")
    append(log, ["t"])
    log.sync(0.0)
    assert log.snapshot_due(1) and not log.snapshot_due(1 << 20)
    log.snapshot(lambda f: f.write(b"state-1"), 1, 1, ALONE)
    append(log, ["r", None, 5, 1])
    log.sync(0.0)
    log.close()
    again = InputLog.open(tmp_path, META, SyncPolicy())
    assert again.snapshot_file is not None
    with open_snapshot(again.snapshot_file) as f:
        assert f.read() == b"state-1"
    assert list(again.records()) == [["r", None, 5, 1]]  # only what came after the snapshot
    assert sorted(p.name for p in tmp_path.glob("inputs-*.log")) == ["inputs-00000001.log"]
    # The segment after the snapshot says where the replica's log stands.
    assert again.index.base == (1, 1, ALONE) and again.index.hard_state == (1, "p1")
    assert (again.index.first, again.index.last_index) == (2, 2)


def test_a_damaged_snapshot_is_refused_not_half_read(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.snapshot(lambda f: f.write(b"state"), 0, 0, ALONE)
    log.close()
    path = tmp_path / "snapshot.bin"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DaemonError, match="snapshot.bin is damaged"):
        InputLog.open(tmp_path, META, SyncPolicy())


def test_a_member_that_left_is_remembered_as_gone(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    assert not log.meta.left
    log.record_left()
    log.close()
    assert InputLog.open(tmp_path, META, SyncPolicy()).meta.left  # the daemon refuses it


def test_entries_and_the_hard_state_come_back_and_read_back(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.save_hard_state(3, "p1")
    log.write_entries(1, [Entry(3, "took_over"), Entry(3, "data", b"x" * 40)])
    log.sync(0.0)
    assert log.read_entries(1, 2, 1 << 20) == [Entry(3, "took_over"), Entry(3, "data", b"x" * 40)]
    assert log.read_entries(1, 2, 0) == [Entry(3, "took_over")]  # at least one
    log.close()
    again = InputLog.open(tmp_path, META, SyncPolicy())
    assert again.index.hard_state == (3, "p1")
    assert list(again.index.bare_entries()) == [Entry(3, "took_over"), Entry(3, "data")]
    assert again.read_entries(2, 2, 1 << 20) == [Entry(3, "data", b"x" * 40)]


def test_an_entry_written_again_replaces_the_tail_for_the_replay(tmp_path: Path) -> None:
    """A follower's conflicting tail (Raft §5.3): what a later write replaced is never
    replayed, though its records are still in the segment."""
    log = InputLog.open(tmp_path, META, SyncPolicy())
    append(log, ["a"], ["b"], ["c"])
    log.sync(0.0)
    log.write_entries(2, [Entry(2, "data", msgpack.packb(["B"]))])
    log.sync(0.0)
    log.close()
    again = InputLog.open(tmp_path, META, SyncPolicy())
    assert list(again.records()) == [["a"], ["B"]]
    assert [e.term for e in again.index.bare_entries()] == [1, 2]


def test_a_record_of_no_known_kind_is_refused_in_one_line(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log._buffer(["zz", 1])
    log.sync(0.0)
    log.close()
    with pytest.raises(DaemonError, match="unknown record 'zz'") as e:
        InputLog.open(tmp_path, META, SyncPolicy())
    assert "\n" not in str(e.value)


def test_a_crash_between_a_segments_base_and_its_snapshot_keeps_the_old_entries() -> None:
    """The new segment's base is durable before the snapshot is: found after the old
    segment's entries (the old snapshot still in force), it changes nothing."""
    index = LogIndex()
    for at in (1, 2, 3):
        index.note(entry_record(at, Entry(1, "data", b"x")), 0, at * 100)
    index.note(base_record(3, 1, ALONE), 1, 0)
    assert (index.first, index.last_index, index.base) == (1, 3, None)
    fresh = LogIndex()  # the snapshot made it: only the new segment is read
    fresh.note(base_record(3, 1, ALONE), 1, 0)
    assert (fresh.first, fresh.last_index, fresh.base) == (4, 3, (3, 1, ALONE))


def test_an_entry_whose_input_is_not_msgpack_is_refused_in_one_line(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.write_entries(1, [Entry(1, "data", b"\xc1")])  # 0xc1: never used by msgpack
    log.sync(0.0)
    log.close()
    again = InputLog.open(tmp_path, META, SyncPolicy())
    with pytest.raises(DaemonError, match="entry 1 holds no input this version reads") as e:
        list(again.records())
    assert "\n" not in str(e.value)
