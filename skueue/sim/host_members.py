"""The simulated daemons of a hosts simulation (skueue/sim/hosts.py): each a
:class:`~skueue.host.host.Host` with the durable record its data directory would hold,
and how it comes back from that record after a crash.

Theory of operation
-------------------
A durable daemon logs every input whose class says ``logged`` and syncs the log once per
step, before the step's frames and replies leave; every so often it pickles its host (a
snapshot) and the log starts afresh.  After ``kill -9`` it unpickles the snapshot (or
builds the host as at its first start) and steps the inputs logged after it; then it
steps ``TookOver`` of its new term (``runtime/replay.py``).

:class:`Member` keeps that record in memory, and next to each logged input the effects
its first step gave, which no disk holds: :func:`rebuild` steps every logged input
again and must get exactly those effects, and the rebuilt host must equal the one lost,
compared with :func:`~skueue.host.state_lines.state_lines` (left out: the host's timers,
which are the driver's clock and not the record's, and its unconfirmed contacts, which
``PeerGone`` forgets without logging).  Any difference raises
:class:`~skueue.host.state_lines.DeterminismError` naming the seed, the member and the
input.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skueue.host.effects import HostEffect
from skueue.host.host import Host
from skueue.host.inputs import Input
from skueue.host.state_lines import DeterminismError, state_lines

NOT_COMPARED = (
    ".clients.deadlines", ".clients.wait_ends", ".clients.arrivals", ".directory.contacts",
    ".clients.out",
)
"""What a rebuilt host need not share with the one lost: its timers (the driver's clock;
a replay leaves them to the next ``TookOver``), the contacts that said hello and were
not confirmed (``PeerGone`` forgets one without logging: nothing durable), and the last
step's effects (handed to the driver; the last step may have been one not logged)."""


@dataclass
class Member:
    """One simulated daemon: its host and its durable record."""

    pid: str
    host: Host
    create: Callable[[], Host]
    """Builds the host as at its first start (its meta file and its command line)."""
    snapshot: bytes | None = None
    log: list[tuple[Input, list[HostEffect]]] = field(default_factory=list)
    log_start: int = 0
    """Where the log starts after the last snapshot: the entries before it are in a
    snapshot not pickled yet (see :func:`record`)."""
    doomed: bool = False  # dies in its next step, before its sync
    term: int = 1
    """The term its daemon leads its process's group in: one more at each restart
    (runtime/group.py), stepped with ``TookOver``."""
    gone: bool = False  # left the cluster and exited: frames to it are lost

    @property
    def serving(self) -> bool:
        """In the ring, not leaving: it takes new client operations."""
        process = self.host.process
        return self.host.joined and not process.leaving and not self.host.left

    @property
    def alive(self) -> bool:
        """Still a member (joining, in the ring or leaving): it may crash."""
        return not self.host.left and not self.gone


@dataclass
class CrashStats:
    crashes: int = 0  # after the sync
    lost: Counter[str] = field(default_factory=Counter)  # before the sync, by input kind
    snapshots: int = 0
    from_snapshot: int = 0  # restarts that began with a snapshot
    replayed: int = 0  # inputs stepped again, over all restarts


def record(member: Member, item: Input, effects: list[HostEffect], snapshot_every: int,
           stats: CrashStats) -> None:  # fmt: skip
    """``item`` was stepped and synced: it joins the member's record (and a snapshot
    replaces the record every ``snapshot_every`` inputs; 0: never).

    A snapshot is pickled only when a restart needs it (:func:`rebuild`): the host it
    holds is the one the inputs before ``log_start`` make, which the restart builds
    again by replaying them (pickling the host at every snapshot made the tests three
    times slower, and nearly all those snapshots were never read)."""
    member.log.append((item, effects))
    if snapshot_every and len(member.log) - member.log_start >= snapshot_every:
        member.log_start = len(member.log)
        stats.snapshots += 1


def compared(host: Host) -> list[tuple[str, Any]]:
    return state_lines(host, NOT_COMPARED)


def rebuild(member: Member, expected: list[tuple[str, Any]], what: str, seed: int,
            stats: CrashStats) -> Host:  # fmt: skip
    """The member's host as its record makes it, checked input by input against the
    first run and, at the end, against ``expected`` (:func:`compared` of ``what``)."""
    if member.snapshot is not None:
        host: Host = pickle.loads(member.snapshot)  # noqa: S301 (our own bytes)
        start = "its snapshot"
    else:
        host = member.create()
        start = "its first start"
    if member.log_start:  # the last snapshot, taken as the daemon takes it
        _replay(member, host, member.log[: member.log_start], start, seed)
        member.snapshot = pickle.dumps(host, protocol=pickle.HIGHEST_PROTOCOL)
        member.log, member.log_start = member.log[member.log_start :], 0
        host = pickle.loads(member.snapshot)  # noqa: S301
        start = "its snapshot"
    stats.from_snapshot += member.snapshot is not None
    _replay(member, host, member.log, start, seed)
    stats.replayed += len(member.log)
    got = compared(host)
    if got != expected:
        raise DeterminismError(f"seed {seed}: {member.pid}: the rebuilt host differs from "
                               f"{what}: {_first_difference(expected, got)}")  # fmt: skip
    return host


def _replay(member: Member, host: Host, log: list[tuple[Input, list[HostEffect]]],
            start: str, seed: int) -> None:  # fmt: skip
    for index, (item, effects) in enumerate(log):
        where = f"seed {seed}: {member.pid}: the replay of logged input {index} after {start}"
        try:
            again = host.step(item)
        except Exception as e:
            raise DeterminismError(f"{where} ({item!r:.200}) raised {e!r}") from e
        if again != effects:
            raise DeterminismError(f"{where} ({item!r:.200}) gave {_diff(effects, again)}")


def _diff(first: list[HostEffect], again: list[HostEffect]) -> str:
    for i, (a, b) in enumerate(zip(first, again, strict=False)):
        if a != b:
            return f"effect {i} {b!r:.300}, not {a!r:.300}"
    return f"{len(again)} effects, not {len(first)}"


def _first_difference(expected: list[tuple[str, Any]], got: list[tuple[str, Any]]) -> str:
    for a, b in zip(expected, got, strict=False):
        if a != b:
            return f"expected {a!r:.300}, rebuilt {b!r:.300}"
    return f"{len(expected)} lines expected, {len(got)} rebuilt"
