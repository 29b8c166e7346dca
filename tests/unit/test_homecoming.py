"""Leadership back home (runtime/homecoming.py), without daemons: when a stand-in hands
the process back, how a backup home answers, and when a restarted home may lead again.
(On real daemons: tests/e2e/test_failover.py, tests/faults/test_failover.py.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from skueue.replication.config import Config
from skueue.replication.messages import AppendEntries, Entry, Message, RequestVote, TimeoutNow
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.group import ProcessGroup
from skueue.runtime.homecoming import HOME_CAUGHT_UP_TICKS, hand_back_if_due
from tests.unit.test_failover import elect
from tests.unit.test_follower_slot import append, open_slot


def restarted_home(tmp_path: Path, sent: list[tuple[str, Message]]) -> ProcessGroup:
    """Process P's home as a start leaves it with failover: its host replayed its log."""
    log = InputLog.open(tmp_path, Meta("P", "n", "queue", ()), SyncPolicy())
    group = ProcessGroup("P", log, Config.of(["P", "b", "c"]), lambda to, m: sent.append((to, m)))
    group.failover = True
    group.replayed = group.log_position()
    return group


def test_a_restarted_home_follows_while_its_log_stays_what_it_replayed(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    home = restarted_home(tmp_path, sent)
    backups: list[bool] = []
    home.on_deposed = lambda: backups.append(True)
    home.receive("c", AppendEntries(5, 0, 0, (), 0))  # a heartbeat: nothing new
    assert backups == [] and home.deposed_at is None and home.node.leader == "c"
    # Told TimeoutNow by that leader, it stands at once, with the leader's leave.
    home.receive("c", TimeoutNow(5))
    home.end_step(0.0)
    asks = [m for _, m in sent if isinstance(m, RequestVote)]
    assert asks and all(m.transfer and not m.pre_vote and m.term == 6 for m in asks)


def test_a_restarted_home_whose_log_moves_is_a_backup(tmp_path: Path) -> None:
    home = restarted_home(tmp_path, [])
    backups: list[bool] = []
    home.on_deposed = lambda: backups.append(True)
    home.receive("c", AppendEntries(5, 0, 0, (), 0))
    home.receive("c", AppendEntries(5, 0, 0, (Entry(5, "data", b"x"),), 0))
    assert backups == [True] and home.releasable == 0


def test_a_backup_told_timeout_now_by_its_leader_comes_home(tmp_path: Path) -> None:
    home = restarted_home(tmp_path, [])
    home.replayed = None  # (a backup's host is stale: it must restart first)
    called: list[bool] = []
    home.on_homecoming = lambda: called.append(True)
    home.receive("c", AppendEntries(5, 0, 0, (), 0))
    assert home.deposed_at is not None
    home.receive("b", TimeoutNow(5))  # not its leader
    assert called == []
    home.receive("c", TimeoutNow(5))
    assert called == [True] and home.node.role == "follower"


def test_a_stand_in_hands_the_process_back_once_its_home_kept_up(tmp_path: Path) -> None:
    sent: list[tuple[str, Message]] = []
    slot = open_slot(tmp_path, sent)  # replica b of P's group
    append(slot, 0, 10, commit=10)
    slot.end_step(0.0)
    slot.failover = True
    elect(slot, sent)
    group = ProcessGroup.taking_over(slot)
    node = group.node
    node.progress["P"].match = node.last_index
    up = {"P"}
    replicas: Any = SimpleNamespace(group=group, own="P", lost=set(), home_caught_up=0,
                                    reaches=up.__contains__)  # fmt: skip
    for _ in range(HOME_CAUGHT_UP_TICKS - 1):
        hand_back_if_due(replicas)
    up.clear()  # unreachable for a tick: it starts counting again
    hand_back_if_due(replicas)
    up.add("P")
    for _ in range(HOME_CAUGHT_UP_TICKS - 1):
        hand_back_if_due(replicas)
    assert node.transfer_to is None and group.leading
    hand_back_if_due(replicas)
    assert node.transfer_to == "P" and not group.leading  # its inputs wait meanwhile
    assert any(to == "P" and isinstance(m, TimeoutNow) for to, m in sent)
