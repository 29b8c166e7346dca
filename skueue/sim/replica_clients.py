"""The replication simulator's clients and its operator (``sim/replicas.py``).

A **client** proposes its commands one at a time, each unique (``c<client>-<n>``), to
the machine it believes leads; a refusal's leader hint tells it where to go next (a
random machine when there is none), and a proposal with no acknowledgment within
``timeout_ms`` is sent again, with the same bytes, wherever it then believes the leader
is.  So a command can be in the log twice; the state machine keeps the first (as
Skueue's retry window does, thesis §6.3), and a command is **acknowledged** only when
the leader that took it sees it committed at the index it gave (I2).

The **operator** makes the group's membership changes one after the other (add a
learner, promote it, remove a voter), at the machine it believes leads, each retried
until the leader's committed configuration shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from skueue.replication.config import AddLearner, Config, ConfigChange, HostId, Promote, Remove
from skueue.replication.effects import ProposalRefused
from skueue.replication.node import ReplicaNode

Outcome = ProposalRefused | int | None
"""What a proposal gave: a refusal, the index it took, or no answer (down or paused)."""


@dataclass
class Client:
    number: int
    commands: int
    timeout_ms: int
    sent: int = 0
    """Commands acknowledged so far (the next is ``command(sent)``)."""
    guess: HostId | None = None
    waiting_until: int = -1
    """While a proposal waits for its acknowledgment: when the client gives up on it."""
    proposals: int = 0

    def command(self, n: int) -> bytes:
        return f"c{self.number}-{n}".encode()

    @property
    def done(self) -> bool:
        return self.sent >= self.commands

    def act(self, now: int, hosts: list[HostId], pick: Callable[[list[HostId]], HostId],
            propose: Callable[[HostId, bytes, int], Outcome]) -> None:
        """Propose the current command, unless one is still awaited."""
        if self.done or now < self.waiting_until:
            return
        target = self.guess if self.guess is not None else pick(hosts)
        self.proposals += 1
        outcome = propose(target, self.command(self.sent), self.number)
        if isinstance(outcome, ProposalRefused):
            self.guess = outcome.leader if outcome.leader not in (None, target) else None
            self.waiting_until = -1
        elif outcome is None:
            self.guess = None  # no answer: try elsewhere next time
            self.waiting_until = -1
        else:
            self.guess = target
            self.waiting_until = now + self.timeout_ms

    def acknowledged(self, command: bytes) -> None:
        if not self.done and command == self.command(self.sent):
            self.sent += 1
            self.waiting_until = -1


def reflected(change: ConfigChange, config: Config) -> bool:
    """Whether ``config`` already holds ``change``."""
    if isinstance(change, AddLearner):
        return change.host in config.members
    if isinstance(change, Promote):
        return change.host in config.voters
    assert isinstance(change, Remove)
    return change.host not in config.members


@dataclass
class Operator:
    changes: list[ConfigChange]
    done: int = 0
    guess: HostId | None = None
    attempts: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.done >= len(self.changes)

    def act(self, hosts: list[HostId], pick: Callable[[list[HostId]], HostId],
            node_of: Callable[[HostId], ReplicaNode | None],
            change_at: Callable[[HostId, ConfigChange], ProposalRefused | None]) -> None:
        if self.finished:
            return
        target = self.guess if self.guess is not None else pick(hosts)
        node = node_of(target)
        if node is None:
            self.guess = None
            return
        if node.role != "leader":
            self.guess = node.leader if node.leader not in (None, target) else None
            return
        self.guess = target
        change = self.changes[self.done]
        if node.commit >= node.snapshot_index and reflected(
                change, node.log.config_at(node.commit)):
            self.log.append(f"{change} committed")
            self.done += 1
            return
        if reflected(change, node.config):
            return  # in the log, not committed yet
        self.attempts += 1
        refused = change_at(target, change)
        if refused is not None:
            self.log.append(f"{change} refused: {refused.reason}")
