"""The write-ahead log of inputs (runtime/durability/input_log.py): records come back whole, a torn
tail is cut, and a directory of another process or version is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy, open_snapshot
from skueue.runtime.errors import DaemonError

META = Meta("p1", "nonce-1", "queue", ())


def test_records_come_back_in_order_with_the_first_nonce(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.append(["t"])
    log.append(["i", "s", 1, [b"x"]])
    log.sync(0.0)
    log.close()
    again = InputLog.open(tmp_path, Meta("p1", "nonce-2", "queue", ()), SyncPolicy())
    assert list(again.records()) == [["t"], ["i", "s", 1, [b"x"]]]
    assert again.meta.nonce == "nonce-1"  # the incarnation the peers know


def test_a_torn_tail_is_cut_and_never_replayed(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    for i in range(3):
        log.append(["r", None, i, 1])
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
    with pytest.raises(DaemonError, match="version 10; this one reads .* version 11") as e:
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
    log.append(["t"])
    log.sync(0.0)
    assert log.snapshot_due(1) and not log.snapshot_due(1 << 20)
    log.snapshot(lambda f: f.write(b"state-1"))
    log.append(["r", None, 5, 1])
    log.sync(0.0)
    log.close()
    again = InputLog.open(tmp_path, META, SyncPolicy())
    assert again.snapshot_file is not None
    with open_snapshot(again.snapshot_file) as f:
        assert f.read() == b"state-1"
    assert list(again.records()) == [["r", None, 5, 1]]  # only what came after the snapshot
    assert sorted(p.name for p in tmp_path.glob("inputs-*.log")) == ["inputs-00000001.log"]


def test_a_damaged_snapshot_is_refused_not_half_read(tmp_path: Path) -> None:
    log = InputLog.open(tmp_path, META, SyncPolicy())
    log.snapshot(lambda f: f.write(b"state"))
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
