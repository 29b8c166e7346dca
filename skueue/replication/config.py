"""A group's membership: its voters and its learners, and the single-server changes
that move from one to the next (thesis §4.1–4.3).

A configuration takes effect at a replica as soon as its entry is in the replica's log,
committed or not (thesis §4.1); the leader proposes one change at a time, and only once
it has committed an entry of its own term (the correction to §4.1 that Ongaro posted to
raft-dev in 2015), so that two configurations in force never lack a common majority.
"""

from __future__ import annotations

from dataclasses import dataclass

HostId = str
"""A replica's host, as the driver names it (in a daemon: the host's id and its data
directory's nonce, so that a host that lost its disk is a new replica)."""


@dataclass(frozen=True, slots=True)
class Config:
    """Who votes and who only follows.  Both sorted, so that equal configurations are
    equal values and encode to the same bytes."""

    voters: tuple[HostId, ...]
    learners: tuple[HostId, ...] = ()

    def __post_init__(self) -> None:
        if tuple(sorted(set(self.voters))) != self.voters:
            raise ValueError(f"voters must be sorted and distinct: {self.voters!r}")
        if tuple(sorted(set(self.learners))) != self.learners:
            raise ValueError(f"learners must be sorted and distinct: {self.learners!r}")
        if set(self.voters) & set(self.learners):
            raise ValueError("a host is a voter or a learner, not both")

    @classmethod
    def of(cls, voters: object, learners: object = ()) -> Config:
        """A configuration from any iterables of host ids (sorted here)."""
        return cls(tuple(sorted(set(voters))), tuple(sorted(set(learners))))  # type: ignore[call-overload]

    @property
    def members(self) -> tuple[HostId, ...]:
        """Every replica the leader sends its log to."""
        return tuple(sorted(self.voters + self.learners))

    def majority(self) -> int:
        """How many voters make a quorum (0 voters: none can)."""
        return len(self.voters) // 2 + 1

    def is_quorum(self, hosts: set[HostId] | frozenset[HostId]) -> bool:
        """Whether ``hosts`` hold a majority of the voters."""
        return bool(self.voters) and len(hosts.intersection(self.voters)) >= self.majority()


@dataclass(frozen=True, slots=True)
class AddLearner:
    """A new replica joins as a learner: it gets the log but neither votes nor counts
    toward a commit until promoted (thesis §4.2.1)."""

    host: HostId


@dataclass(frozen=True, slots=True)
class Promote:
    """A caught-up learner becomes a voter."""

    host: HostId


@dataclass(frozen=True, slots=True)
class Remove:
    """A voter or a learner leaves the group."""

    host: HostId


ConfigChange = AddLearner | Promote | Remove


def apply_change(config: Config, change: ConfigChange) -> Config | str:
    """The configuration after ``change``, or why the change is refused."""
    voters, learners = set(config.voters), set(config.learners)
    host = change.host
    if isinstance(change, AddLearner):
        if host in voters or host in learners:
            return f"{host} is already a replica of the group"
        learners.add(host)
    elif isinstance(change, Promote):
        if host not in learners:
            return f"{host} is not a learner of the group"
        learners.discard(host)
        voters.add(host)
    else:
        if host not in voters and host not in learners:
            return f"{host} is not a replica of the group"
        if voters == {host}:
            return f"{host} is the group's last voter"
        voters.discard(host)
        learners.discard(host)
    return Config.of(voters, learners)
