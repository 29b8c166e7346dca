"""Re-replication on real daemons (``skueued --replicas 3 --failover``;
runtime/re_replication.py): a host lost for good, once ``skueue remove-member`` says
so, leaves every group it kept a copy for with three replicas again, on the survivors;
then a second host, the one that took the first one's process over, hangs (SIGSTOP:
its connections stay open, nothing comes back), and is found lost by its silence
(``--member-lost-after``, runtime/member_silence.py); once it runs again it learns that
its group replaced it and stops, saying so (runtime/failover.py).  Nothing acknowledged
is lost.  (Under load: tests/faults/test_failover.py.)"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import skueue.client.blocking
from skueue.client.errors import SkueueError
from tests.e2e.daemons import Daemon, stop, wait_ready
from tests.e2e.test_failover import members_stats, stand_in_for, wait_serving
from tests.e2e.test_restore_from_copies import assert_exactly, drain, fill, start

LOST_AFTER_S = 10
"""``--member-lost-after``: short, for the second host, which no command names."""
STOPS_WITHIN_S = 30.0
"""How long a host taken for lost may serve on after it runs again: until a member of
its group answers its first message (an election timeout, 3 to 6 s)."""
REPLACED_S = 120.0
"""How long the test waits for every group to have three replicas without the lost host
(a learner takes the leader's snapshot and log, then two changes commit)."""


def lose(daemons: list[Daemon], i: int, tmp_path: Path) -> None:
    """Host ``i`` is lost for good: killed, and its data directory gone."""
    daemons[i].proc.send_signal(signal.SIGKILL)
    daemons[i].proc.wait(timeout=10)
    shutil.rmtree(tmp_path / f"data{i}")


def hang(daemons: list[Daemon], i: int) -> None:
    """Host ``i`` hangs: stopped, its connections open (resumed by :func:`resume`)."""
    daemons[i].proc.send_signal(signal.SIGSTOP)


def resume(daemon: Daemon) -> str:
    """A hung host runs again, after the others replaced it: it stops by itself, with
    one line for the operator; that line."""
    daemon.proc.send_signal(signal.SIGCONT)
    code = daemon.proc.wait(timeout=STOPS_WITHIN_S)
    assert code == 1, (code, daemon.stderr()[-3000:])
    return daemon.stderr().strip().splitlines()[-1]


def groups_seen(address: str) -> dict[str, set[tuple[str, ...]]]:
    """Per process, the voters each copy of its group holds (the survivors' copies;
    the leader's own configuration when the home leads)."""
    seen: dict[str, set[tuple[str, ...]]] = {}
    for process, member in members_stats(address).items():
        durable = member["durable"]
        if not durable.get("led_by"):  # (a backup's own group may lag: its leader's counts)
            seen.setdefault(process, set()).add(tuple(durable["replicas"]))
        for copied, copy in durable["copies"].items():
            seen.setdefault(copied, set()).add(tuple(copy["voters"]))
    return seen


def wait_replaced(address: str, lost: set[str], processes: list[str]) -> float:
    """Seconds until every copy of every group names three voters, none of them lost."""
    began = time.monotonic()
    while True:
        seen = groups_seen(address)
        if all(
            seen.get(p) and all(len(v) == 3 and not lost & set(v) for v in seen[p])
            for p in processes
        ):
            return time.monotonic() - began
        assert time.monotonic() - began < REPLACED_S, seen
        time.sleep(1.0)


def remove_when_served(address: str, member: str) -> float:
    """``skueue remove-member member`` through ``address``, asked again until its
    process is served by a copy (until then it is refused: it holds part of the ring);
    the seconds it took."""
    began = time.monotonic()
    while True:
        try:
            with skueue.client.blocking.connect_blocking(address) as q:
                answer = q.remove_member(member)
        except SkueueError as e:
            assert time.monotonic() - began < REPLACED_S, f"never removed: {e}"
            time.sleep(0.5)
            continue
        assert "served by a copy" in str(answer), answer
        return time.monotonic() - began


def test_two_hosts_lost_one_after_the_other(tmp_path: Path) -> None:
    addresses, _, daemons = start(5, tmp_path, ["--failover", "--member-lost-after",
                                                str(LOST_AFTER_S)])
    try:
        wait_ready(daemons)
        inserted = fill(daemons, b"x" * 200)
        # The first host lost is the one that holds the most of the queue.
        entries = {a: m["entries"] for a, m in members_stats(daemons[0].address).items()}
        first = addresses.index(max(addresses, key=entries.__getitem__))
        lost: set[str] = set()
        acknowledged: list[bytes] = []
        unknown: list[bytes] = []
        for round_ in range(2):
            if round_ == 0:
                lose(daemons, first, tmp_path)
            else:
                hang(daemons, first)
            lost.add(addresses[first])
            survivor = next(d.address for i, d in enumerate(daemons)
                            if addresses[i] not in lost)  # fmt: skip
            seconds, ok, unsure = wait_serving(survivor, f"marker{round_}-")
            acknowledged += ok
            unknown += unsure
            print(f"round {round_}: serving again {seconds:.2f} s after the kill")
            if round_ == 0:
                remove_when_served(survivor, addresses[first])
            seconds = wait_replaced(survivor, lost, addresses)
            print(f"round {round_}: every group has three replicas again after {seconds:.1f} s")
            if round_ == 0:  # next, the host that took the lost one's process over
                first = addresses.index(stand_in_for(survivor, addresses[first]))
        logs = "".join(d.stderr() for i, d in enumerate(daemons) if addresses[i] not in lost)
        assert "member_lost_after_s" in logs  # the second found lost by itself
        said = resume(daemons[first])
        print(f"the hung host, running again: {said}")
        assert "taken for lost for good while it was away" in said and "--join" in said, said
        began = time.monotonic()
        rest = drain(survivor)
        print(f"drained {len(rest)} in {time.monotonic() - began:.1f} s")
        markers = [e for e in rest if e.startswith(b"marker")]
        assert set(acknowledged) <= set(markers) <= {*acknowledged, *unknown}, markers
        assert len(markers) == len(set(markers)), markers
        assert_exactly(inserted, [e for e in rest if not e.startswith(b"marker")])
    finally:
        stop(daemons)
