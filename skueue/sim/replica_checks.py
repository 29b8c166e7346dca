"""The safety properties of Raft (Raft §5.2–§5.4, Figure 3) and docs/replication.md §9,
checked by the replication simulator (``sim/replicas.py``) as the run goes.

Each check keeps what it needs from the whole history, so that a property about two
moments (a vote and a later one, a commit and a later leader) is checked when the second
comes:

- **Election Safety**: at most one leader per term, over the whole run;
- **one vote per term** per replica, across its crashes (I7: the vote is durable first);
- **Log Matching**: every log write (and so every log ever held, in memory or on disk,
  durable or not) agrees with every other on ``(index, term) -> (entry, term before)``;
  by induction along the log, two logs with one entry in common share the prefix;
- **Leader Append-Only**: a leader never rewrites its own log;
- **Leader Completeness**: an entry committed in term ``t`` is in the log of every
  leader of a later term (checked when the leader is first seen, and when a commit is
  first known against the leaders of that moment);
- **State Machine Safety**: every machine applies the same entry at each index, only
  committed ones, never beyond its commit index; a snapshot holds exactly what was
  applied through its index;
- **commit is durable on a majority**: when a leader commits, a majority of the voters
  of its configuration hold the entry on their durable disks (the leader counted
  itself only once ``Persisted``, thesis §10.2.1, and followers acked only what was synced);
- **I2, no early acknowledgment**: a client's command is acknowledged only at an index
  that is committed and holds that command.

A broken property raises ``AssertionError`` naming the seed and the step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from skueue.replication.config import HostId
from skueue.replication.messages import Entry
from skueue.replication.node import ReplicaNode
from skueue.sim.replica_disk import DiskImage, StateMachine


@dataclass(frozen=True, slots=True)
class Committed:
    entry: Entry
    term: int
    """The lowest term of a replica that knew it committed (leaders of later terms must
    hold it)."""


class ReplicaChecks:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.step = 0
        self.leaders: dict[int, HostId] = {}
        """term -> its leader."""
        self.votes: dict[tuple[HostId, int], HostId] = {}
        """(voter, term) -> the candidate it voted for."""
        self.entries: dict[tuple[int, int], tuple[Entry, int | None]] = {}
        """(index, term) -> (the entry, the term of the entry before it)."""
        self.committed: dict[int, Committed] = {}
        self.applied: dict[int, Entry] = {}
        """index -> the entry every machine applies there."""
        self.leaders_checked: set[tuple[HostId, int]] = set()

    def fail(self, what: str) -> None:
        raise AssertionError(f"seed {self.seed}, step {self.step}: {what}")

    # -- elections ------------------------------------------------------------------------

    def roles(self, nodes: Iterable[ReplicaNode]) -> None:
        """Election Safety, and Leader Completeness for each leader first seen."""
        live = list(nodes)
        for node in live:
            if node.role != "leader":
                continue
            first = self.leaders.setdefault(node.term, node.host)
            if first != node.host:
                self.fail(f"two leaders in term {node.term}: {first} and {node.host}")
            if (node.host, node.term) not in self.leaders_checked:
                self.leaders_checked.add((node.host, node.term))
                for index, done in self.committed.items():
                    if done.term < node.term:
                        self._holds(node, index, done)
        for node in live:
            if node.applied > node.commit:
                self.fail(f"{node.host} applied {node.applied} beyond its commit {node.commit}")

    def voted(self, voter: HostId, term: int, candidate: HostId) -> None:
        first = self.votes.setdefault((voter, term), candidate)
        if first != candidate:
            self.fail(f"{voter} voted twice in term {term}: for {first}, then {candidate}")

    # -- logs ---------------------------------------------------------------------------

    def written(self, host: HostId, leader: bool, log: DiskImage, index: int,
                entries: tuple[Entry, ...]) -> None:
        """Before ``entries`` are written at ``index`` of ``host``'s log ``log``."""
        if leader and index != log.last_index + 1:
            self.fail(f"leader {host} rewrote its log from {index} (it held {log.last_index})")
        before = log.term_at(index - 1)
        for offset, entry in enumerate(entries):
            key = (index + offset, entry.term)
            seen = self.entries.setdefault(key, (entry, before))
            if seen != (entry, before):
                self.fail(f"log matching: {host} writes {entry} after term {before} at "
                          f"{key[0]}, where another log holds {seen[0]} after term {seen[1]}")
            before = entry.term

    def same_log(self, node: ReplicaNode, log: DiskImage, first: int) -> None:
        """The replica's log in memory is what its driver wrote, from ``first`` on."""
        if (node.last_index, node.snapshot_index) != (log.last_index, log.snapshot_index):
            self.fail(f"{node.host} holds {node.snapshot_index}..{node.last_index} in memory "
                      f"but {log.snapshot_index}..{log.last_index} on disk")
        for index in range(max(first, node.snapshot_index + 1), node.last_index + 1):
            if node.entry(index) != log.entry(index):
                self.fail(f"{node.host}'s entry {index} in memory differs from its disk's")

    # -- commit and apply ---------------------------------------------------------------

    def commit_known(self, node: ReplicaNode, index: int, entry: Entry,
                     leaders: Iterable[ReplicaNode]) -> None:
        seen = self.committed.get(index)
        if seen is not None and seen.entry != entry:
            self.fail(f"{node.host} commits {entry} at {index}, committed before as {seen.entry}")
        if seen is None or node.term < seen.term:
            done = Committed(entry, node.term)
            self.committed[index] = done
            for leader in leaders:
                if leader.role == "leader" and leader.term > done.term:
                    self._holds(leader, index, done)

    def _holds(self, leader: ReplicaNode, index: int, done: Committed) -> None:
        if index <= leader.snapshot_index:
            return  # in its snapshot: the state machine checks cover it
        if index > leader.last_index or leader.entry(index) != done.entry:
            self.fail(f"leader completeness: {leader.host}, leader of term {leader.term}, "
                      f"lacks {done.entry} committed at {index} in term {done.term}")

    def commit_durable(self, leader: ReplicaNode, index: int,
                       durable: dict[HostId, DiskImage]) -> None:
        """When ``leader`` commits through ``index``: a majority of its voters hold the
        entry on their durable disks."""
        term = leader.term_at(index)
        holding = {
            voter for voter in leader.config.voters
            if voter in durable and (durable[voter].snapshot_index >= index
                                     or durable[voter].term_at(index) == term)
        }
        if not leader.config.is_quorum(holding):
            self.fail(f"{leader.host} commits {index} (term {term}) durable only on "
                      f"{sorted(holding)} of voters {list(leader.config.voters)}")

    def applying(self, node: ReplicaNode, index: int, entry: Entry) -> None:
        if index > node.commit:
            self.fail(f"{node.host} applies {index} beyond its commit {node.commit}")
        first = self.applied.setdefault(index, entry)
        if first != entry:
            self.fail(f"state machine safety: {node.host} applies {entry} at {index}, "
                      f"where another machine applied {first}")
        done = self.committed.get(index)
        if done is not None and done.entry != entry:
            self.fail(f"{node.host} applies {entry} at {index}, committed as {done.entry}")

    def restored(self, host: HostId, index: int, state: StateMachine) -> None:
        """A state machine restored as of ``index`` (a snapshot installed or read at a
        restart) holds exactly what was applied through it."""
        expected = [(i, e.data) for i, e in sorted(self.applied.items())
                    if i <= index and e.kind == "data"]
        if state != expected:
            self.fail(f"{host}'s snapshot at {index} holds {len(state)} commands, "
                      f"not the {len(expected)} applied through it")

    def acknowledged(self, node: ReplicaNode, index: int, command: bytes) -> None:
        """I2: an acknowledgment leaves only for a committed entry holding the command."""
        done = self.committed.get(index)
        if index > node.commit or done is None or done.entry.data != command:
            self.fail(f"{node.host} acknowledges {command!r} at {index}, which is not "
                      f"committed there (commit {node.commit}, holds {done})")

    # -- at the end -----------------------------------------------------------------------

    def final(self, states: dict[HostId, StateMachine], proposed: set[bytes],
              acknowledged: dict[bytes, int], expected: set[bytes]) -> None:
        """Every member applied one sequence; each command in it was proposed; each
        acknowledged command is in it at the index it was acknowledged at (and counts
        once: the state machine keeps a command's first entry, as the retry window
        does); every command was acknowledged."""
        reference = next(iter(states.values()))
        for host, state in states.items():
            if state != reference:
                self.fail(f"{host} applied another sequence than the other members")
        applied = set(reference)
        for _, data in reference:
            if data not in proposed:
                self.fail(f"{data!r} applied, never proposed")
        for command, index in acknowledged.items():
            if (index, command) not in applied:
                self.fail(f"{command!r} acknowledged at {index}, not applied there")
        if set(acknowledged) != expected:
            self.fail(f"never acknowledged: {sorted(expected - set(acknowledged))[:5]}")
