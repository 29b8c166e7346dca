"""One process of a replicated hosts simulation as a Raft group of machines
(docs/replication.md §4, §5.3–5.5, §6.2): the driver of its replicas, as a daemon's owner
will drive its slots.

Theory of operation
-------------------
Only the group's leader takes inputs, and not while it is paused.
:meth:`Group.propose` steps them on the leader's host at once (pipelined), proposes each
as one entry (the entry's data is a key of the simulation's table of inputs; the daemon
will log the record instead), and holds the step's effects.  Each time the leader's
commit index moves, the held effects through it are handed to the simulation in log
order (``Outside.release``): nothing of an entry leaves before it is committed (I2).  A
follower steps each committed entry into its host and hands its effects over only to be
compared with what the leader released (I3).

Elections: a machine that becomes leader first steps the tail it inherited past its
commit index (it will commit it with its ``took_over`` entry) and then proposes the
host's ``TookOver`` as its first data entry, so that every replica steps it at the same
place of the log (§5.3).  (The Raft module's ``took_over`` entry carries no data, and
``TookOver`` needs the new leader's lease clock: hence a data entry of its own, right
after it, in the same step.)  A leader that steps down with its host past its commit
index rebuilds the host from its committed prefix (§5.4); a machine that restarts
rebuilds from its log as the commit index reaches it (§5.5).  An old leader may learn
only late that it was deposed (back from a pause or a partition): the peer frames held
in the log (``in_log``) are always those of whoever leads now, not cleared by its step
down.

Every machine syncs at the end of its action: its writes become durable, then its
``Persisted`` is stepped, then the messages that had to wait for the writes leave.  A
doomed machine crashes at the end of its next action instead, losing what it had not
synced (a leader's appends left already: they go before its own write, thesis §10.2.1).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from skueue.host.effects import HostEffect
from skueue.host.host import Host
from skueue.host.inputs import Input, PeerControl, PeerMessage, TookOver
from skueue.replication.config import Config, HostId
from skueue.replication.effects import (
    AppendLocal,
    Commit,
    InstallSnapshot,
    ProposalRefused,
    ReplicaEffect,
    RoleChanged,
    SaveHardState,
    Send,
    SendSnapshot,
)
from skueue.replication.inputs import Applied, Persisted, Propose, ReplicaInput
from skueue.replication.messages import Entry, Message
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import DurableState, ReplicaSettings
from skueue.sim.replicated_machines import Held, Machine, new_machine


class Outside(Protocol):
    """What a group needs of the simulation around it."""

    inputs: dict[bytes, Input]

    def post(self, src: HostId, dst: HostId, message: Message) -> None: ...
    def release(self, group: Group, m: Machine, index: int, entry: Entry,
                effects: list[HostEffect], own: bool) -> None: ...  # fmt: skip
    def leader_changed(self, group: Group) -> None: ...
    def crashed(self, m: Machine) -> None: ...
    def now_ms(self) -> int: ...


@dataclass
class GroupStats:
    elections: int = 0  # leaderships taken
    rebuilds: int = 0  # leaders that stepped down past their commit index
    inherited: int = 0  # entries a new leader stepped that it had not applied
    restarts: int = 0


class Group:
    def __init__(self, pid: str, create: Callable[[], Host], replicas: int,
                 settings: ReplicaSettings, rng: random.Random,
                 outside: Outside) -> None:  # fmt: skip
        self.pid = pid
        self.create = create
        self.settings = settings
        self.rng = rng
        self.outside = outside
        ids = [f"{pid}/r{i}" for i in range(replicas)]
        self.config = Config.of(ids)
        self.machines = {mid: new_machine(mid, pid, create, self.config, self._node)
                         for mid in ids}  # fmt: skip
        self.stats = GroupStats()
        self.view: tuple[HostId, int] | None = None
        self.newest_term = 0
        """The newest term a leader took."""
        """(leader, term) as the simulation last saw it (None: no leader)."""
        self.in_log: set[tuple[str, int]] = set()
        """Peer frames (sender, number) in the leader's log and not yet released: they
        stay in their link, and are not delivered again (I4)."""

    def _node(self, mid: HostId, durable: DurableState) -> ReplicaNode:
        return ReplicaNode(mid, durable, self.settings, random.Random(self.rng.randrange(1 << 30)))

    # -- what the simulation reads --------------------------------------------------------

    def leader(self) -> Machine | None:
        """The machine that leads in the newest term a leader took (an older leader not
        yet deposed may still think it leads: it can commit nothing, and is never the
        group's leader again, even once the newer one stepped down: its host's view of
        the clients is stale, as its connections closed meanwhile)."""
        leaders = [m for m in self.machines.values()
                   if m.up and m.node.role == "leader" and m.lead_term is not None]  # fmt: skip
        m = max(leaders, key=lambda m: m.node.term, default=None)
        return m if m is not None and m.node.term >= self.newest_term else None

    def serving(self) -> Machine | None:
        """The leader, if it takes inputs now (a paused one takes none: what is sent to
        it waits, as the simulation's callers do when there is no leader)."""
        leader = self.leader()
        return None if leader is None or leader.paused else leader

    def face(self) -> Host:
        """The host the simulation shows for the process: the leader's, else the most
        advanced replica's."""
        leader = self.leader()
        if leader is not None:
            return leader.host
        return max(self.machines.values(), key=lambda m: (m.up, m.applied)).host

    def quiet(self) -> bool:
        """A leader holds everything it stepped committed and released."""
        leader = self.serving()
        return (leader is not None and not leader.held
                and leader.node.commit == leader.node.last_index)  # fmt: skip

    # -- inputs ---------------------------------------------------------------------------

    def propose(self, items: list[Input]) -> bool:
        """The leader steps ``items`` and proposes them; False if the group has no leader
        or it is paused (nothing was taken)."""
        m = self.serving()
        if m is None:
            return False
        self._propose_on(m, items, own=True)
        self.act(m, None)
        return True

    def _propose_on(self, m: Machine, items: list[Input], own: bool) -> None:
        keys = []
        index = m.node.last_index
        assert m.stepped == index, f"{m.mid}: a leader steps every entry of its log"
        for item in items:
            index += 1
            key = str(len(self.outside.inputs)).encode()
            self.outside.inputs[key] = item
            keys.append(key)
            m.held.append(Held(index, m.host.step(item), own))
            m.stepped = index
            if isinstance(item, PeerMessage | PeerControl):
                self.in_log.add((item.peer, item.number))
        self._node_step(m, Propose(tuple(keys)))
        assert m.node.last_index == index, f"{m.mid}: the proposal was not appended"

    def act(self, m: Machine, event: ReplicaInput | None) -> None:
        """``m`` steps ``event`` (if any) and syncs, or crashes before it if doomed."""
        if event is not None:
            self._node_step(m, event)
        if m.doomed:
            self.crash(m)
        else:
            self._sync(m)

    def _node_step(self, m: Machine, event: ReplicaInput) -> None:
        for effect in m.node.step(event):
            self._carry_out(m, effect)
        if m.up and m.node.role == "leader" and m.lead_term != m.node.term:
            self._take_over(m)

    def _carry_out(self, m: Machine, effect: ReplicaEffect) -> None:
        match effect:
            case SaveHardState() | AppendLocal():
                m.pending.append(effect)
            case Send(to=to, message=message, after_sync=after_sync):
                if after_sync:
                    m.held_sends.append(effect)
                else:
                    self.outside.post(m.mid, to, message)
            case Commit(index=index):
                self._commit(m, index)
            case RoleChanged(role=role):
                if m.lead_term is not None and role != "leader":
                    self._step_down(m)
            case ProposalRefused() | SendSnapshot() | InstallSnapshot():
                raise AssertionError(f"{m.mid}: unexpected {effect!r:.200}")

    def _sync(self, m: Machine) -> None:
        while m.pending:
            pending, m.pending = m.pending, []
            for write in pending:
                m.disk.apply(write)
            last = m.disk.last_index
            if last and not all(isinstance(w, SaveHardState) for w in pending):
                self._node_step(m, Persisted(last, m.disk.log[-1].term))
        held, m.held_sends = m.held_sends, []
        for send in held:
            self.outside.post(m.mid, send.to, send.message)

    # -- commit, apply, release ------------------------------------------------------------

    def _commit(self, m: Machine, index: int) -> None:
        node = m.node
        if m.lead_term is not None:
            while m.held and m.held[0].index <= index:
                held = m.held.popleft()
                assert held.index == m.applied + 1, f"{m.mid}: released out of order"
                self.outside.release(self, m, held.index, node.entry(held.index),
                                     held.effects, held.own)  # fmt: skip
                m.applied = held.index
        else:
            for at in range(m.applied + 1, index + 1):
                entry = node.entry(at)
                effects = self._apply(m, entry)
                m.applied = m.stepped = at
                self.outside.release(self, m, at, entry, effects, False)
        assert not node.step(Applied(m.applied))

    def _apply(self, m: Machine, entry: Entry) -> list[HostEffect]:
        """Step one entry of the log into ``m``'s host (I1: in index order)."""
        if entry.kind != "data":
            return []  # ``took_over`` and configurations change no host
        return m.host.step(self.outside.inputs[entry.data])

    # -- leadership -----------------------------------------------------------------------

    def _take_over(self, m: Machine) -> None:
        """``m`` just won its term: it steps what it inherited, then ``TookOver``."""
        node = m.node
        assert m.stepped == m.applied and not m.held, f"{m.mid}: a follower ran ahead"
        m.lead_term = self.newest_term = node.term
        self.stats.elections += 1
        for at in range(m.stepped + 1, node.last_index + 1):
            entry = node.entry(at)
            self.stats.inherited += entry.kind == "data"
            m.held.append(Held(at, self._apply(m, entry), own=False))
            m.stepped = at
        clock = self.outside.now_ms()
        before = m.host.process.leases.now_ms
        self._propose_on(m, [TookOver(node.term, clock)], own=True)
        _check_clean(m, max(clock, before))
        self._frames_of_leader()
        self.outside.leader_changed(self)

    def _step_down(self, m: Machine) -> None:
        """``m`` no longer leads: what it stepped past its commit index is undone by a
        rebuild from the committed prefix (§5.4); its held effects never leave (I2)."""
        m.lead_term = None
        m.held.clear()
        if m.stepped > m.applied:
            self.stats.rebuilds += 1
            self._rebuild(m)
        self._frames_of_leader()
        self.outside.leader_changed(self)

    def _rebuild(self, m: Machine) -> None:
        m.host = self.create()
        for at in range(1, m.applied + 1):
            self._apply(m, m.node.entry(at))
        m.stepped = m.applied

    def _frames_of_leader(self) -> None:
        """``in_log`` follows whoever leads now: an old leader that learns late that it
        was deposed (back from a pause or a partition) must not clear the frames held in
        the new leader's log, or they would be delivered and logged twice."""
        leader = self.leader()
        self.in_log = set() if leader is None else self._frames_in_log(leader)

    def _frames_in_log(self, m: Machine) -> set[tuple[str, int]]:
        out = set()
        for at in range(m.applied + 1, m.node.last_index + 1):
            entry = m.node.entry(at)
            item: Any = self.outside.inputs.get(entry.data) if entry.kind == "data" else None
            if isinstance(item, PeerMessage | PeerControl):
                out.add((item.peer, item.number))
        return out

    # -- crashes ---------------------------------------------------------------------------

    def crash(self, m: Machine) -> None:
        """``m`` stops: what it had not synced is lost, and so is its host."""
        was_leading = m.lead_term is not None
        m.up, m.doomed, m.lead_term = False, False, None
        m.pending, m.held_sends = [], []
        m.held.clear()
        self.outside.crashed(m)
        if was_leading:
            self._frames_of_leader()
            self.outside.leader_changed(self)

    def lose(self, m: Machine) -> None:
        """``m``'s host is gone with its disk, for good: it stops and never restarts.
        (Its disk stays in the record: an entry it acknowledged before the loss was
        committed on a majority then, which is what the commit rule promises.)"""
        if m.up:
            self.crash(m)
        m.gone = True

    def restart(self, m: Machine) -> None:
        """``m`` comes back from its disk as a follower; its host is rebuilt as the
        commit index reaches it."""
        self.stats.restarts += 1
        m.node = self._node(m.mid, m.disk.durable_state())
        m.host = self.create()
        m.applied = m.stepped = 0
        m.up = True


def _check_clean(m: Machine, clock: int) -> None:
    """I8: after ``TookOver`` nothing of an earlier term's clients is left, and the lease
    clock did not go back."""
    clients = m.host.clients
    left = {
        "leases": m.host.process.leases.table.leases, "waits": clients.waits,
        "deadlines": clients.deadlines, "wait ends": clients.wait_ends,
    }  # fmt: skip
    for what, held in left.items():
        assert not held, f"{m.mid}: {what} of an earlier term outlived TookOver: {held!r:.200}"
    assert m.host.process.leases.now_ms == clock, f"{m.mid}: the lease clock went back"
