"""A replicated joiner steps ``JoinStart`` only once its group has a second voter
(runtime/startup.py, ``_start_joining``), and a restart neither loses nor repeats it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from skueue.host.inputs import JoinStart
from skueue.runtime.startup import _start_joining


def joiner(joined: bool = True, alone: bool = True, started: bool = False) -> Any:
    entered: list[object] = []
    recorded: list[bool] = []
    owner = SimpleNamespace(
        replicas=SimpleNamespace(when_replicated=None),
        must_take_over=False,
        enter=entered.append,
        host=SimpleNamespace(joined=joined,
                             process=SimpleNamespace(stats=lambda: SimpleNamespace(alone=alone))),
    )  # fmt: skip
    log = SimpleNamespace(meta=SimpleNamespace(join_started=started),
                          record_join_started=lambda: recorded.append(True))  # fmt: skip
    return owner, log, entered, recorded


def test_it_joins_once_its_group_has_a_second_replica_and_says_so_a_tick_later() -> None:
    owner, log, entered, recorded = joiner()
    _start_joining(owner, ("seed", "127.0.0.1:7400"), log, fresh=True)
    assert entered == [] and owner.replicas.when_replicated is not None
    owner.must_take_over = True
    assert owner.replicas.when_replicated() is False and entered == []  # TookOver first
    owner.must_take_over = False
    assert owner.replicas.when_replicated() is False
    assert entered == [JoinStart("seed", "127.0.0.1:7400", None, 0)] and recorded == []
    assert owner.replicas.when_replicated() is True  # its step is written: on record
    assert len(entered) == 1 and recorded == [True]


def test_a_restart_before_it_joined_still_waits_and_one_after_does_not_join_again() -> None:
    owner, log, entered, recorded = joiner()  # the log holds no JoinStart
    _start_joining(owner, ("seed", "a"), log, fresh=False)
    assert owner.replicas.when_replicated is not None
    owner, log, entered, recorded = joiner(joined=False)  # it stepped it, then crashed
    _start_joining(owner, ("seed", "a"), log, fresh=False)
    assert owner.replicas.when_replicated is None and entered == [] and recorded == [True]
    owner, log, entered, recorded = joiner(started=True)
    _start_joining(owner, ("seed", "a"), log, fresh=False)
    assert owner.replicas.when_replicated is None and entered == [] and recorded == []


def test_an_unreplicated_joiner_joins_at_its_first_start_only() -> None:
    owner, log, entered, _ = joiner()
    owner.replicas = None
    _start_joining(owner, ("seed", "a"), log, fresh=True)
    _start_joining(owner, ("seed", "a"), log, fresh=False)
    assert entered == [JoinStart("seed", "a", None, 0)]
