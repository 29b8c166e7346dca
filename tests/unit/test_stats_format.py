"""``skueue stats``' text: each member's line says where and how it keeps its data, and
how much room its disk has left (runtime/durability/disk_space.py)."""

from __future__ import annotations

from typing import Any

from skueue.cli.stats_format import format_stats

MIB = 1024 * 1024


def stats_with(*members: dict[str, Any]) -> dict[str, Any]:
    return {"processes": len(members), "size": 0, "totals": {}, "members": list(members)}


def durable(**extra: Any) -> dict[str, Any]:
    return {"data_dir": "/var/lib/skueue", "fsync": "batch", "log_bytes": 3 * MIB, **extra}


def test_a_durable_member_shows_its_directory_log_and_free_space() -> None:
    text = format_stats(stats_with(
        {"process": "a", "entries": 5, "anchor": True, "durable": durable(free_bytes=300 * MIB)},
        {"process": "b", "entries": 7, "durable": durable(free_bytes=75 * 1024 * MIB,
                                                          replicas=["b"], term=4)},
    ))  # fmt: skip
    lines = text.splitlines()
    assert lines[-2] == (
        "  a: 5  (anchor)  (durable in /var/lib/skueue, fsync batch, log 3.0 MiB since the "
        "last snapshot, 300 MiB free)"
    )
    assert lines[-1].endswith(
        "fsync batch, 1 replica, term 4, log 3.0 MiB since the last snapshot, 75.0 GiB free)")


def test_refusals_below_the_reserve_are_counted_and_in_memory_members_said_so() -> None:
    short = durable(free_bytes=100 * MIB, refused_for_space=12)
    text = format_stats(stats_with(
        {"process": "a", "entries": 0, "durable": short},
        {"process": "b", "entries": 0, "durable": None},
    ))  # fmt: skip
    a, b = text.splitlines()[-2:]
    assert a.endswith("100 MiB free, 12 enqueue requests refused below the disk reserve)")
    assert b == "  b: 0  (in memory)"


def test_a_member_of_an_older_version_without_the_disk_fields_still_prints() -> None:
    text = format_stats(stats_with({"process": "a", "entries": 1, "durable": durable()}))
    assert text.splitlines()[-1].endswith("log 3.0 MiB since the last snapshot)")


def test_a_replicated_member_shows_how_far_behind_each_follower_is() -> None:
    member = {"process": "a", "entries": 0,
              "durable": durable(replicas=["a", "b", "c"], term=2,
                                 replica_lag={"c": 40, "b": 0})}  # fmt: skip
    line = format_stats(stats_with(member)).splitlines()[-1]
    assert "3 replicas (entries behind: b 0, c 40), term 2, log" in line, line


def test_a_replicated_member_shows_the_checks_of_its_copies() -> None:
    copies = {"b": {"applied": 40, "checked": 3, "diverged": 0, "rebuilding": False},
              "c": {"applied": None, "checked": 1, "diverged": 1, "rebuilding": True}}  # fmt: skip
    member = {"process": "a", "entries": 0,
              "durable": durable(replicas=["a", "b", "c"], term=2, copies=copies)}
    line = format_stats(stats_with(member)).splitlines()[-1]
    assert ("term 2, 2 copies of others (4 checks passed, 1 DIVERGED, 1 without a state, "
            "1 being rebuilt), log") in line, line
