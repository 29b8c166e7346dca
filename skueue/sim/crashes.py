"""Crashes and restarts in the simulator: the durable daemon's recovery, in memory
(issue 11).

Theory of operation
-------------------
A durable daemon (skueue/runtime/durability/input_log.py, replay.py, snapshots.py) logs every
input of its core (a client request, a peer message, a tick, a leave, a join) and syncs
the log once per step *before* the step's messages and replies leave; every so often it
pickles its whole state (a snapshot) and the log starts afresh.  After ``kill -9`` it
unpickles the snapshot and replays the inputs logged after it through the same code.
What the replay sends again is dropped by the peers (the reliable link layer numbers its
frames), the replies it makes again are dropped too.

The simulator keeps the same record for each process, in memory: :class:`Durable` holds
what a daemon's disk would hold after its last sync, that is the inputs the process took
(:data:`Input`) and a snapshot made with :func:`pickle.dumps` every ``snapshot_every``
inputs (never with 0: then the process is rebuilt from how it was created).  Next to each
input it keeps the effects the first run produced, which no disk holds: they are what
the replay is checked against.

Two kinds of crash, at a step boundary of one process:

- after the sync (:meth:`Crashes.crash`): every input it took is logged and every effect
  of them has left.  The process is thrown away and rebuilt from its record; nothing is
  sent again (the peers' links would skip it) and nothing in flight changes.
- before the sync (:meth:`Crashes.lose`): the process handled an input, but died before
  the step's log write was synced, so none of the step's effects left.  The input is
  not in the log; the rebuilt process is the one before the step, and the driver makes
  the input happen again the way the real world would: a peer message stays in flight
  (the sender's link retransmits what was never acknowledged), a tick is simply lost,
  a client request is retried by its client with the same operation.

Both are checks of the core's determinism: every input replayed must give exactly the
effects it gave the first time (a request, also the same operation id), and the rebuilt
process must equal the one thrown away (or the one before the lost step), compared with
:func:`state_lines` (pickle bytes are not stable: a set unpickled may iterate in another
order than the original, and the memo of shared strings differs).  Any difference raises
:class:`DeterminismError` naming the process, the seed and the input.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
import random
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skueue.core.effects import Effect, Send
from skueue.core.ops import Op
from skueue.core.process import Process


class DeterminismError(AssertionError):
    """The replay of a process's logged inputs did not give back what the first run did:
    a bug in the core (or in this model of recovery), never the schedule's fault."""


# -- the inputs of the core, as the log holds them -------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A client request: ``new_op`` then ``submit``, as the daemon's host does both inside
    one logged request (so the process's operation counter comes back by replay too).
    ``op`` is what ``new_op`` must make: the driver knows it before, for its history."""

    op: Op

    def describe(self) -> str:
        return f"request {self.op.describe()}"


@dataclass(frozen=True, slots=True)
class Deliver:
    send: Send  # a message of another process, for one of this process's nodes

    def describe(self) -> str:
        return f"message: {self.send.describe()}"


@dataclass(frozen=True, slots=True)
class Tick:
    def describe(self) -> str:
        return "tick"


@dataclass(frozen=True, slots=True)
class Leave:
    def describe(self) -> str:
        return "leave"


@dataclass(frozen=True, slots=True)
class Join:
    def describe(self) -> str:
        return "join"


@dataclass(frozen=True, slots=True)
class Clock:
    """The lease clock (skueue/core/leases.py): the driver's time, an input."""

    now: int

    def describe(self) -> str:
        return f"clock {self.now}"


@dataclass(frozen=True, slots=True)
class EndLease:
    """A consumer ends a lease: ``how`` is "ack" or a return reason ("nack", ...)."""

    lease_id: int
    how: str

    def describe(self) -> str:
        return f"{self.how} lease #{self.lease_id}"


Input = Request | Deliver | Tick | Leave | Join | Clock | EndLease


def do(process: Process, item: Input) -> list[Effect]:
    """The core call an input stands for, the first time and in the replay alike."""
    match item:
        case Request(op):
            made = process.new_op(
                op.kind,
                op.value,
                op.queue,
                lease_ms=op.lease_ms,
                max_deliveries=op.max_deliveries,
                settings=op.settings,
                priority=op.priority,
            )
            if made != op:
                raise DeterminismError(f"made operation {made.describe()}, not {op.describe()}")
            return process.submit(made)
        case Deliver(send):
            return process.handle(send.to, send.message)
        case Tick():
            return process.tick()
        case Leave():
            return process.leave()
        case Join():
            return process.join()
        case Clock(now):
            return process.clock(now)
        case EndLease(lease_id, "ack"):
            process.leases.ack(lease_id)
            return []
        case EndLease(lease_id, how):
            return process.release(lease_id, how) or []
    raise TypeError(f"not an input of the core: {item!r}")


# -- the durable record ------------------------------------------------------------------


@dataclass(slots=True)
class Logged:
    item: Input
    effects: list[Effect]  # what the first run gave: the simulator's memory, not the disk's


@dataclass(slots=True)
class Durable:
    """What one process's data directory holds after its last sync."""

    create: Callable[[], Process]  # how it was created (its meta file, in a daemon)
    snapshot: bytes | None = None
    log: list[Logged] = field(default_factory=list)


@dataclass(slots=True)
class CrashStats:
    crashes: int = 0  # after the sync
    lost: dict[str, int] = field(default_factory=dict)  # before the sync, by input kind
    snapshots: int = 0
    replayed: int = 0  # inputs replayed, over all restarts
    from_snapshot: int = 0  # restarts that began with a snapshot


class Crashes:
    """The durable records of a simulation's processes, and their crashes."""

    def __init__(self, seed: int, snapshot_every: int = 0) -> None:
        self.seed = seed
        self.snapshot_every = snapshot_every
        self.records: dict[str, Durable] = {}
        self.stats = CrashStats()

    def register(self, process: Process, create: Callable[[], Process]) -> None:
        """Keep the record of a process that ``create()`` makes again (it has taken no
        input yet)."""
        self._same(process.process_id, "its creation", state_lines(process), create())
        self.records[process.process_id] = Durable(create)

    def logged(self, process: Process, item: Input) -> list[Effect]:
        """Run one input and log it (synced) before its effects leave; returns them."""
        effects = do(process, item)
        record = self.records[process.process_id]
        record.log.append(Logged(item, effects))
        if self.snapshot_every and len(record.log) >= self.snapshot_every:
            record.snapshot = pickle.dumps(process, protocol=pickle.HIGHEST_PROTOCOL)
            record.log = []
            self.stats.snapshots += 1
        return effects

    def crash(self, process: Process) -> Process:
        """A crash after the sync: the process rebuilt from its record, checked equal."""
        self.stats.crashes += 1
        return self.restart(process.process_id, state_lines(process), "the process that crashed")

    def lose(self, process: Process, item: Input) -> Process:
        """A crash before the sync: ``item`` is handled, then the process dies before the
        step's log write is synced.  Returns the process rebuilt as it was before."""
        before = state_lines(process)
        do(process, item)  # its effects never leave
        name = type(item).__name__.lower()
        self.stats.lost[name] = self.stats.lost.get(name, 0) + 1
        return self.restart(
            process.process_id, before, f"the process before the lost {item.describe()}"
        )

    def restart(self, pid: str, expected: list[tuple[str, Any]], what: str) -> Process:
        """Unpickle the snapshot (or create the process again), replay the log, check
        every input's effects and the final state."""
        record = self.records[pid]
        if record.snapshot is not None:
            process = pickle.loads(record.snapshot)
            self.stats.from_snapshot += 1
            start = "its snapshot"
        else:
            process = record.create()
            start = "its creation"
        for index, logged in enumerate(record.log):
            where = f"replay of logged input {index} after {start} ({logged.item.describe()})"
            try:
                effects = do(process, logged.item)
            except DeterminismError as e:
                raise self._error(pid, f"{where}: {e}") from None
            except Exception as e:
                raise self._error(pid, f"{where}: raised {e!r}") from e
            if effects != logged.effects:
                raise self._error(pid, f"{where}: {_effects_diff(logged.effects, effects)}")
        self.stats.replayed += len(record.log)
        self._same(pid, what, expected, process)
        return process

    def _same(self, pid: str, what: str, expected: list[tuple[str, Any]], got: Process) -> None:
        lines = state_lines(got)
        if lines == expected:
            return
        pairs = enumerate(zip(expected, lines, strict=False))
        i = next((i for i, (a, b) in pairs if a != b), min(len(expected), len(lines)))
        want_text = expected[i] if i < len(expected) else "(nothing more)"
        have_text = lines[i] if i < len(lines) else "(nothing more)"
        raise self._error(
            pid,
            f"the rebuilt state differs from {what}: expected {want_text!r:.300}, "
            f"rebuilt {have_text!r:.300}",
        )

    def _error(self, pid: str, what: str) -> DeterminismError:
        return DeterminismError(f"seed {self.seed}: process {pid}: {what}")


def _effects_diff(first: list[Effect], again: list[Effect]) -> str:
    for i, (a, b) in enumerate(zip(first, again, strict=False)):
        if a != b:
            return f"effect {i} was {a!r:.300}, the replay gave {b!r:.300}"
    return f"the first run gave {len(first)} effects, the replay {len(again)}"


# -- comparing states ----------------------------------------------------------------------

_LEAVES = (type(None), bool, int, float, str, bytes, enum.Enum)


def state_lines(obj: object) -> list[tuple[str, Any]]:
    """A process's state as (path, leaf) lines, in a deterministic order: every field of
    every dataclass (also those compared by identity, like a LeaveTicket), dicts and
    lists in their order (which the core may iterate), sets as sets, and an object
    reached again through another path as a reference to the first path, so that two
    states are equal only if they also share the same objects (the three nodes of a
    process share their join and leave tickets)."""
    out: list[tuple[str, Any]] = []
    _walk(obj, "", out, {})
    return out


def _walk(obj: object, path: str, out: list[tuple[str, Any]], seen: dict[int, str]) -> None:
    if isinstance(obj, _LEAVES):
        out.append((path, obj))
        return
    mutable = not isinstance(obj, tuple | frozenset) and not _frozen_dataclass(obj)
    if mutable:
        first = seen.get(id(obj))
        if first is not None:
            out.append((path, ("same as", first)))
            return
        seen[id(obj)] = path
    name = type(obj).__name__
    if isinstance(obj, set | frozenset):
        items = frozenset(tuple(state_lines(e)) for e in obj)
        out.append((path, (name, items)))
    elif isinstance(obj, dict):
        out.append((path, (name, len(obj))))
        for i, (key, value) in enumerate(obj.items()):
            _walk(key, f"{path}{{{i}}}", out, seen)
            _walk(value, f"{path}[{key!r}]", out, seen)
    elif isinstance(obj, list | tuple | deque):
        out.append((path, (name, len(obj))))
        for i, value in enumerate(obj):
            _walk(value, f"{path}[{i}]", out, seen)
    elif isinstance(obj, array):
        out.append((path, (name, obj.typecode, obj.tobytes())))
    elif dataclasses.is_dataclass(obj):
        out.append((path, name))
        for f in dataclasses.fields(obj):
            _walk(getattr(obj, f.name), f"{path}.{f.name}", out, seen)
    else:
        attrs = _attributes(obj)
        if attrs is None:
            raise TypeError(f"state_lines: cannot compare {name} at {path or 'the top'}")
        out.append((path, name))
        for attr, value in attrs:
            _walk(value, f"{path}.{attr}", out, seen)


def _frozen_dataclass(obj: object) -> bool:
    params = getattr(type(obj), "__dataclass_params__", None)
    return params is not None and params.frozen


def _attributes(obj: object) -> list[tuple[str, Any]] | None:
    """A plain object's attributes: its slots (IntMap) or its __dict__."""
    names = []
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    names = [n for n in names if n not in ("__dict__", "__weakref__")]
    if not names and not hasattr(obj, "__dict__"):
        return None
    attrs = [(n, getattr(obj, n)) for n in names if hasattr(obj, n)]
    attrs += sorted(getattr(obj, "__dict__", {}).items())
    return attrs


# -- the simulator's side --------------------------------------------------------------------


class CrashSteps:
    """Crash steps for a simulator that gives every input of its processes' cores through
    :meth:`input` (the adversarial scheduler, skueue/sim/adversary.py, mixes this in).

    A crash after the sync happens at once; one before the sync dooms the process, which
    dies in its next step that takes a request, a message or a tick (a join or a leave
    goes through)."""

    # What the simulator has.
    rng: random.Random
    processes: dict[str, Process]
    order: list[Process]
    drain_process: Process
    in_flight: list[Send]

    def _apply(self, process: Process, effects: list[Effect]) -> None:
        raise NotImplementedError

    def start_crashes(
        self, seed: int, crashes: int, snapshot_every: int, before_sync_ratio: float
    ) -> None:
        """With ``crashes=0`` nothing is logged and no random number is drawn."""
        self.crashes = Crashes(seed, snapshot_every) if crashes else None
        self.before_sync_ratio = before_sync_ratio
        self.doomed: set[str] = set()  # processes that die before their next sync
        self.retries: dict[str, Op] = {}  # the request each lost, which its client retries

    def register(self, process: Process, create: Callable[[], Process]) -> None:
        if self.crashes is not None:
            self.crashes.register(process, create)

    def input(self, process: Process, item: Input) -> Process:
        """One input of a process's core, its effects applied; with crashes, logged before
        they leave, or lost with the process's crash before the sync.  Returns the
        process (rebuilt, if it crashed)."""
        if self.crashes is None:
            self._apply(process, do(process, item))
            return process
        pid = process.process_id
        if pid in self.doomed and isinstance(item, Request | Deliver | Tick):
            self.doomed.discard(pid)
            rebuilt = self.crashes.lose(process, item)
            self._replace(process, rebuilt)
            if isinstance(item, Deliver):
                self.in_flight.append(item.send)  # never acknowledged: sent again
            elif isinstance(item, Request):
                self.retries[pid] = item.op  # its client gets no answer and retries
            return rebuilt
        self._apply(process, self.crashes.logged(process, item))
        return process

    def crash(self) -> None:
        """A random live process crashes, after its last sync or in its next step."""
        assert self.crashes is not None
        victim = self.rng.choice([p for p in self.order if not p.departed])
        if self.rng.random() < self.before_sync_ratio:
            self.doomed.add(victim.process_id)
        else:
            self._replace(victim, self.crashes.crash(victim))

    def retried(self, process: Process) -> Process:
        """Its client's lost request sent again (the same operation: the process never
        counted it), before anything else the client asks of it."""
        while process.process_id in self.retries:
            op = self.retries.pop(process.process_id)
            assert process.next_op_id == op.op_id, "a request overtook the one retried"
            process = self.input(process, Request(op))
        return process

    def _replace(self, old: Process, new: Process) -> None:
        self.processes[new.process_id] = new
        self.order[next(i for i, p in enumerate(self.order) if p is old)] = new
        if self.drain_process is old:
            self.drain_process = new
