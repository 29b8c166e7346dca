"""Hosts simulated with replication (docs/replication.md §8, stage 2b's prototype): each
Skueue process is a Raft group of ``replicas`` machines, each with its own
:class:`~skueue.host.host.Host` and :class:`~skueue.replication.node.ReplicaNode`.

Theory of operation
-------------------
The cluster, its clients, its links and its workload are those of
:class:`~skueue.sim.hosts.HostsSim`; what changes is who steps a process's inputs
(``sim/replicated_groups.py``): only its group's leader, which holds the effects of each
step until the step's entry is committed, then releases them here in log order:

- frames to other processes join their links (``sim/host_links.py``) only then (I2);
  their numbers follow the committed log, whichever leader released them;
- a frame *from* a peer stays in its link until the entry holding it is committed (I4):
  it is not delivered again while it is in the leader's log, and if that leader dies
  first it goes to the next one (unless that one's log holds it already);
- client replies go to the connection the request came on, only from the leader that
  stepped it in its own term; a client whose leader changed has its connection closed
  and sends its request again with its key (``sim/host_clients.py``), to the new leader.

The replicas' own messages take a :class:`~skueue.sim.replicated_machines.Channel` that
loses, duplicates and reorders them; every machine's Raft clock ticks now and then.
``machine_crashes`` kill a machine (leader or follower) at random moments, after its
sync or, for a share ``before_sync_ratio``, in its next action before it (its unsynced
writes are lost); it restarts from its disk some steps later.  ``machine_partitions``
cut a machine (leader or follower) off from every other machine of its group for a
drawn span of steps: whatever it sends or is sent is lost; a leader so cut takes inputs
it cannot commit until CheckQuorum makes it step down, and its clients move to the
leader the others elect, as on a crash, while it keeps its state.  ``machine_pauses``
stop a machine for a drawn span (no Raft tick, nothing delivered: messages to it wait in
flight; a paused leader takes no input, which waits as when there is no leader); it
resumes with its stale view, and if it led, the others' higher term deposes it; if it
still leads, it first steps ``ClientGone`` for the client connections that closed while
it was paused (their requests failed), as a daemon's sockets would tell it.
``machine_losses`` lose a machine with its disk, for good (a host gone: at most one per
group, so its majority is left): it never comes back, and the group carries on with the
two others (no re-replication yet); at the end they must hold the leader's whole log.

Checked as the run goes (``AssertionError`` naming the seed): at most one leader per
term (I5); an entry released only once a majority's disks hold it (I2), by a leader
neither paused nor cut off, under a commit it counted in its own term (fencing, §5.4,
Raft §5.4.2); every replica that steps an entry steps the one released at that index,
with the same frames (I3, and State Machine Safety); replicas at the same applied index
have equal hosts (I1, on a sample of steps); after ``TookOver`` nothing of an earlier
term remains (I8); a leader cut off steps down within two election timeouts of its ticks
(CheckQuorum).  Once the clients are done (every partition healed, every machine back),
the replicas' traffic alone must bring each group to one log, commit and host
(``SimStuck`` naming the seed otherwise); then the checks of the hosts simulator's tests
(history, nothing lost or duplicated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skueue.core.effects import Send
from skueue.host.effects import HostEffect, Reply, SendControl
from skueue.host.inputs import ClientGone, FromClient, Hello, Input, PeerControl, PeerMessage
from skueue.replication.config import HostId
from skueue.replication.inputs import Received
from skueue.replication.inputs import Tick as RaftTick
from skueue.replication.messages import Entry, Message
from skueue.replication.settings import ReplicaSettings
from skueue.sim.host_links import Link, Links
from skueue.sim.host_members import Member, compared
from skueue.sim.hosts import HostsConfig, HostsResult, HostsSim
from skueue.sim.replicated_groups import Group
from skueue.sim.replicated_machines import Channel, Machine
from skueue.sim.rounds import SimStuck

RAFT_TICK_RATIO = 0.1
"""The chance that a machine's Raft clock ticks at a step (a heartbeat interval is about
ten steps, an election timeout 100 to 200)."""
COMPARE_RATIO = 0.02
"""The share of steps after which one group's replicas are compared (I1, I3)."""
RESTART_STEPS = (30, 600)
CUT_STEPS = (20, 800)
"""How long a partition lasts: from a lost heartbeat or two to several election timeouts."""
PAUSE_STEPS = (20, 800)
SETTLE_STEPS = 20_000
"""Rounds of Raft traffic alone, at the end, within which every group must converge."""
SETTINGS = ReplicaSettings(election_ticks=10, heartbeat_ticks=1)


class HeldLinks(Links):
    """Links whose frames in a leader's log wait there, undelivered, until committed."""

    def __init__(self, links: Links, seed: int) -> None:
        super().__init__(links.rng, links.any_order)
        self.seed = seed

    def pick_free(self, held: Callable[[Link], set[int]]) -> tuple[Link, int] | None:
        """As :meth:`Links.pick`, among frames no leader holds in its log."""
        free: dict[Link, list[int]] = {}
        for link, queue in self.frames.items():
            skip = held(link)
            indexes = [i for i, (number, _) in enumerate(queue) if number not in skip]
            if indexes:
                free[link] = indexes
        if not free:
            return None
        links = list(free)
        if self.mood == "starve" and self.rng.random() < 0.95:
            links = [k for k in links if k[1] != self.victim] or links
        link = self.rng.choice(links)
        indexes = free[link]
        if not self.any_order:
            return link, indexes[0]
        if self.mood == "newest":
            return link, indexes[-1 - min(len(indexes) - 1, int(self.rng.expovariate(0.5)))]
        return link, self.rng.choice(indexes)

    def take_number(self, link: Link, number: int) -> None:
        for index, (n, _) in enumerate(self.frames.get(link, ())):
            if n == number:
                self.take(link, index)
                return
        raise AssertionError(f"seed {self.seed}: frame {number} of {link} was taken twice "
                             "or never sent")


class ReplicatedHostsSim(HostsSim):
    replicated = True

    def __init__(self, config: HostsConfig) -> None:
        if config.replicas < 2:
            raise ValueError("ReplicatedHostsSim runs replicas > 1")
        super().__init__(config)
        rng = self.rng
        self.links = self.held_links = HeldLinks(self.links, config.seed)
        self.channel = Channel(rng, config.channel_loss, config.channel_duplication)
        self.inputs: dict[bytes, Input] = {}
        self.groups: dict[str, Group] = {}
        self.machines: dict[HostId, tuple[Group, Machine]] = {}
        for pid, member in self.members.items():
            group = Group(pid, member.create, config.replicas, SETTINGS, rng, self)
            self.groups[pid] = group
            for mid, m in group.machines.items():
                self.machines[mid] = (group, m)
            member.host = group.face()
        self.released: dict[str, list[tuple[int, bytes, list[Any]]]] = {
            pid: [] for pid in self.groups
        }
        """Per process, each released entry's term, data and frames (I3, I5)."""
        self.terms: dict[tuple[str, int], HostId] = {}
        span = max(1, len(self.clients.script) * 20)
        for _ in range(config.machine_crashes):
            self.events.append((rng.randrange(span), "machine-crash"))
        for _ in range(config.machine_partitions):
            self.events.append((rng.randrange(span), "machine-partition"))
        for _ in range(config.machine_pauses):
            self.events.append((rng.randrange(span), "machine-pause"))
        for _ in range(config.machine_losses):
            self.events.append((rng.randrange(span), "machine-loss"))
        self.events.sort(reverse=True)
        self.machine_crashes = 0
        self.lost_unsynced = 0
        self.machine_partitions = 0
        self.machine_pauses = 0
        self.machine_losses = 0
        self.cut_ticks: dict[HostId, int] = {}
        """Per machine cut off while it leads, the Raft ticks it has had so (CheckQuorum)."""
        self.closed_while_paused: dict[str, set[int]] = {pid: set() for pid in self.groups}
        """Per process, the client connections that closed while its leader was paused."""

    # -- what the groups ask of the simulation ---------------------------------------------

    def post(self, src: HostId, dst: HostId, message: Message) -> None:
        self.channel.post(src, dst, message)

    def now_ms(self) -> int:
        return self.steps

    def crashed(self, m: Machine) -> None:
        self.channel.drop_to(m.mid)

    def leader_changed(self, group: Group) -> None:
        """A new leader, or none: the clients' connections to the old one close (they
        send again, with their keys), and the links to and from it start new sessions."""
        leader = group.leader()
        view = None if leader is None else (leader.mid, leader.node.term)
        self.members[group.pid].host = group.face()
        if view == group.view:
            return
        self.closed_while_paused[group.pid].clear()  # ``TookOver`` forgets them all (I8)
        if leader is not None:
            first = self.terms.setdefault((group.pid, leader.node.term), leader.mid)
            assert first == leader.mid, (f"seed {self.config.seed}: two leaders of "
                                         f"{group.pid} in term {leader.node.term}")  # fmt: skip
        if group.view is not None:
            self.clients.member_crashed(group.pid)
            self.links.end_sessions(group.pid)
        group.view = view

    def release(self, group: Group, m: Machine, index: int, entry: Entry,
                effects: list[HostEffect], own: bool) -> None:  # fmt: skip
        """``m`` stepped the committed entry at ``index``: the first replica to do so
        lets its effects out (a leader, always); the others must match it."""
        seed, pid = self.config.seed, group.pid
        frames = [e for e in effects if isinstance(e, Send | SendControl)]
        released = self.released[pid]
        if index <= len(released):
            term, data, first = released[index - 1]
            assert (entry.term, entry.data) == (term, data), (
                f"seed {seed}: {m.mid} stepped another entry at {index} than the one "
                f"released (term {entry.term}, not {term})")  # fmt: skip
            assert frames == first, f"seed {seed}: {m.mid}: other frames at {index} (I3)"
            return
        assert index == len(released) + 1, f"seed {seed}: {pid}: a gap before {index}"
        assert m.lead_term is not None, f"seed {seed}: {m.mid}: a follower released {index}"
        assert not m.paused and m.mid not in self.channel.cut, (
            f"seed {seed}: {m.mid} released {index} while paused or cut off")  # fmt: skip
        holders = sum(d.disk.term_at(index) == entry.term for d in group.machines.values())
        assert 2 * holders > len(group.machines), (
            f"seed {seed}: {m.mid} released {index} held by {holders} disks (I2)")  # fmt: skip
        self._check_own_term(group, m, index)
        released.append((entry.term, entry.data, frames))
        item = self.inputs.get(entry.data) if entry.kind == "data" else None
        if isinstance(item, PeerMessage | PeerControl):
            self.held_links.take_number((item.peer, pid), item.number)  # acked now (I4)
            group.in_log.discard((item.peer, item.number))
        member = self.members[pid]
        member.host = m.host
        self._route(member, effects if own else [e for e in effects
                                                  if not isinstance(e, Reply)])  # fmt: skip

    def _check_own_term(self, group: Group, m: Machine, index: int) -> None:
        """Fencing (§5.4, Raft §5.4.2): a leader releases only what a commit it counted in
        its own term covers, an entry of that term at or past ``index`` on a majority of
        the disks; an old leader back from a pause or a partition has no such commit."""
        commit, term = m.node.commit, m.lead_term
        holders = sum(d.disk.term_at(commit) == term for d in group.machines.values())
        assert commit >= index and m.node.log.term_at(commit) == term, (
            f"seed {self.config.seed}: {m.mid} released {index} under a commit ({commit}) "
            f"not of its term {term}")  # fmt: skip
        assert 2 * holders > len(group.machines), (
            f"seed {self.config.seed}: {m.mid} released {index} in term {term}, whose "
            f"entry at its commit {commit} only {holders} disks hold")  # fmt: skip

    # -- the schedule -----------------------------------------------------------------------

    def _step(self) -> None:
        super()._step()
        self._replicate()

    def _drain_step(self) -> None:
        super()._drain_step()
        self._replicate()

    def _replicate(self) -> None:
        """The machines' Raft clocks tick, some of their messages arrive; a check."""
        rng = self.rng
        for group, m in self.machines.values():
            if m.up and not m.paused and rng.random() < RAFT_TICK_RATIO:
                group.act(m, RaftTick())
                self._check_quorum(m)
        for src, dst, message in self.channel.arrivals():
            group, m = self.machines[dst]
            if m.up:
                group.act(m, Received(src, message))
        if rng.random() < COMPARE_RATIO:
            self._compare(rng.choice(list(self.groups.values())))

    def _check_quorum(self, m: Machine) -> None:
        """CheckQuorum (thesis §6.2, docs/replication.md §5.2): a leader cut off from its
        group steps down within two election timeouts of its ticks (one may have begun
        with its followers heard, before the cut), and then takes no input."""
        if m.mid not in self.channel.cut or m.lead_term is None:
            self.cut_ticks.pop(m.mid, None)
            return
        ticks = self.cut_ticks[m.mid] = self.cut_ticks.get(m.mid, 0) + 1
        assert ticks < 2 * SETTINGS.election_ticks, (
            f"seed {self.config.seed}: {m.mid} still leads term {m.lead_term} after "
            f"{ticks} ticks cut off from its group (CheckQuorum)")  # fmt: skip

    def _compare(self, group: Group) -> None:
        """I1, I3: replicas whose hosts stepped the same committed prefix are equal; and
        Log Matching (Raft §5.3): two logs with an entry of the same index and term hold
        the same entries up to it."""
        logs = [m.node.log.held for m in group.machines.values() if m.up]
        for a, b in zip(logs, logs[1:], strict=False):
            at = min(len(a), len(b))
            while at and a[at - 1].term != b[at - 1].term:
                at -= 1
            assert a[:at] == b[:at], f"seed {self.config.seed}: {group.pid}: logs differ"
        by_index: dict[int, list[Machine]] = {}
        for m in group.machines.values():
            if m.up and m.stepped == m.applied:
                by_index.setdefault(m.applied, []).append(m)
        for index, same in by_index.items():
            if len(same) > 1:
                first = compared(same[0].host)
                for other in same[1:]:
                    assert compared(other.host) == first, (
                        f"seed {self.config.seed}: {same[0].mid} and {other.mid} differ "
                        f"at applied index {index} (I1)")  # fmt: skip

    def _event(self, kind: str) -> None:
        if kind == "machine-crash":
            self._machine_crash()
        elif kind == "machine-loss":
            self._machine_loss()
        elif kind.startswith("restart "):
            group, m = self.machines[kind.removeprefix("restart ")]
            if m.gone:
                return  # lost since it went down: it never comes back
            if m.up:  # doomed, it has not acted since (cut off, its clock slow): dies now
                group.crash(m)
            group.restart(m)
        elif kind == "machine-partition":
            self._machine_partition()
        elif kind.startswith("heal "):
            self.heal(self.machines[kind.removeprefix("heal ")][1])
        elif kind == "machine-pause":
            self._machine_pause()
        elif kind.startswith("resume "):
            self.resume(self.machines[kind.removeprefix("resume ")][1])
        else:
            super()._event(kind)

    def _later(self, steps: tuple[int, int], kind: str) -> None:
        self.events.append((self.steps + self.rng.randrange(*steps), kind))
        self.events.sort(reverse=True)

    def _machine_partition(self) -> None:
        """A machine (leader or follower, up or not) is cut off from every other machine
        of its group; it heals some steps later."""
        whole = [m for _, m in self.machines.values() if m.mid not in self.channel.cut]
        if not whole:
            return
        m = self.rng.choice(whole)
        self.machine_partitions += 1
        self.cut(m)
        self._later(CUT_STEPS, f"heal {m.mid}")

    def cut(self, m: Machine) -> None:
        """``m`` is cut off: if it leads it can commit nothing, and CheckQuorum makes it
        step down; its clients move when the others elect a leader (``leader_changed``),
        as on a crash, but ``m`` keeps its state."""
        self.channel.cut.add(m.mid)

    def heal(self, m: Machine) -> None:
        """``m`` hears from its group again: the leader's appends repair its log."""
        self.channel.cut.discard(m.mid)
        self.cut_ticks.pop(m.mid, None)

    def _machine_pause(self) -> None:
        """An up machine stops (SIGSTOP) for some steps, then resumes with its stale view:
        if it led, its old term is fenced by the others' higher one (§5.4)."""
        # not a doomed one: it would outlast its restart, dying only once it resumes
        up = [m for _, m in self.machines.values() if m.up and not m.paused and not m.doomed]
        if not up:
            return
        m = self.rng.choice(up)
        self.machine_pauses += 1
        self.pause(m)
        self._later(PAUSE_STEPS, f"resume {m.mid}")

    def pause(self, m: Machine) -> None:
        m.paused = True
        self.channel.paused.add(m.mid)

    def resume(self, m: Machine) -> None:
        """``m`` runs again; if it still leads, it first sees the client connections that
        closed meanwhile (its sockets say so), whose leases go back."""
        m.paused = False
        self.channel.paused.discard(m.mid)
        if self.groups[m.pid].serving() is not m:
            return  # a follower, or deposed meanwhile: the new leader forgot them (I8)
        closed, self.closed_while_paused[m.pid] = self.closed_while_paused[m.pid], set()
        if closed:
            self.groups[m.pid].propose([ClientGone(conn) for conn in sorted(closed)])

    def _machine_crash(self) -> None:
        up = [(g, m) for g, m in self.machines.values()
              if m.up and not m.doomed and not m.paused]  # fmt: skip
        if not up:
            return
        group, m = self.rng.choice(up)
        self.machine_crashes += 1
        if self.rng.random() < self.config.before_sync_ratio:
            m.doomed = True  # dies in its next action, before its sync
            self.lost_unsynced += 1
        else:
            group.crash(m)
        self._later(RESTART_STEPS, f"restart {m.mid}")

    def _machine_loss(self) -> None:
        """A host lost for good, with its disk: one machine of a group that has lost none
        yet (the others are its majority), leader or follower, up or down."""
        whole = [(g, m) for g, m in self.machines.values()
                 if not any(o.gone for o in g.machines.values())]  # fmt: skip
        if not whole:
            return
        group, m = self.rng.choice(whole)
        self.machine_losses += 1
        m.paused = False  # nothing of it runs again: a pause ends with it
        self.channel.paused.discard(m.mid)
        group.lose(m)

    # -- the members, as groups -------------------------------------------------------------

    def enter(self, member: Member, item: Input) -> bool:
        """The process's leader steps ``item`` and proposes it; False if it has none (the
        input is not taken: a frame stays, a client sends again)."""
        group = self.groups[member.pid]
        if not group.propose([item]):
            if group.leader() is not None and isinstance(item, FromClient | ClientGone):
                self.closed_while_paused[member.pid].add(item.client)  # the client closes it
            return False
        if self.config.lease_ratio and group.serving() is not None:
            self._check_leases(member)
        return True

    def _deliver(self) -> None:
        picked = self.held_links.pick_free(self._in_log)
        if picked is None:
            return
        link, index = picked
        number, payload = self.links.peek(link, index)
        src, dst = link
        member = self.members[dst]
        if self.groups[dst].serving() is None:
            return  # nobody takes it now: it stays in its link
        if payload[0] == "msg":
            item: Input = PeerMessage(src, number, payload[1], payload[2])
        else:
            item = PeerControl(src, number, payload[1])
        if link not in self.links.sessions:
            if not self.enter(member, Hello(src, str(self.addresses[src]), f"n-{src}")):
                return
            self.links.sessions.add(link)
        self.enter(member, item)  # taken once its entry is committed (release)

    def _in_log(self, link: Link) -> set[int]:
        src, dst = link
        return {n for peer, n in self.groups[dst].in_log if peer == src}

    def _tick(self, member: Member) -> None:
        leader = self.groups[member.pid].serving()
        if leader is None:
            return
        member.host = leader.host  # what time made due is the leader's
        super()._tick(member)

    def _finished(self) -> bool:
        return super()._finished() and all(g.quiet() for g in self.groups.values())

    def run(self) -> HostsResult:
        result = super().run()
        self._settle()
        for pid, group in self.groups.items():
            self.members[pid].host = group.face()
        result.processes = self.processes()
        return result

    def _settle(self) -> None:
        """Once the clients are done, every partition healed and every machine back: the
        replicas' traffic alone brings each group's machines to the leader's log, commit
        and host (a machine back from a partition or a pause caught up), or the run is
        stuck."""
        for _ in range(SETTLE_STEPS):
            if all(self._converged(g) for g in self.groups.values()):
                break
            self._replicate()
        else:
            late = [g.pid for g in self.groups.values() if not self._converged(g)]
            raise SimStuck(f"seed {self.config.seed}: groups {late} did not converge in "
                           f"{SETTLE_STEPS} rounds")  # fmt: skip
        for group in self.groups.values():
            self._compare(group)

    def _converged(self, group: Group) -> bool:
        leader = group.serving()
        if leader is None or not group.quiet():
            return False
        log, commit = leader.node.log.held, leader.node.commit
        return all(m.gone or (m.up and m.node.commit == commit == m.applied
                              and m.node.log.held == log)
                   for m in group.machines.values())  # fmt: skip
