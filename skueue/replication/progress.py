"""What a leader knows of each other replica's log, and the commit index it gives
(Raft §5.3, §5.4.2; the probe, replicate and snapshot states are etcd raft's).

- **probe**: the leader does not know where the logs agree; it sends one append and
  waits for the answer (or the next heartbeat) before the next, backing off on refusals;
- **replicate**: the logs agree through ``match``; appends go out as entries arrive,
  pipelined up to ``inflight_appends_max`` unanswered;
- **snapshot**: the replica needs entries the leader compacted; it waits for the
  snapshot's answer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from skueue.replication.config import Config, HostId

ProgressState = Literal["probe", "replicate", "snapshot"]


@dataclass(slots=True)
class Progress:
    match: int = 0
    """The last index known to be in both logs (and durable on the replica)."""
    next: int = 1
    """The next index to send."""
    state: ProgressState = "probe"
    paused: bool = False
    """probe: an append is out and unanswered."""
    inflight: deque[int] = field(default_factory=deque)
    """replicate: the last index of each append sent and not yet answered."""
    counts: bool = True
    """Its acks count toward a commit (false while it may have forgotten some, I6)."""
    recent_active: bool = False
    """Heard from in the current CheckQuorum period."""
    snapshot_index: int = 0
    """snapshot: the index of the snapshot sent."""
    snapshot_ticks: int = 0
    """snapshot: ticks since it was sent (sent again after an election timeout)."""

    def become_probe(self) -> None:
        """Probe from after what it holds (after the snapshot, once one went through)."""
        if self.state == "snapshot":
            self.next = max(self.match + 1, self.snapshot_index + 1)
        else:
            self.next = self.match + 1
        self.state, self.paused = "probe", False
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state, self.paused = "replicate", False
        self.inflight.clear()
        self.next = self.match + 1

    def become_snapshot(self, index: int) -> None:
        self.state, self.paused = "snapshot", False
        self.inflight.clear()
        self.snapshot_index, self.snapshot_ticks = index, 0

    def is_paused(self, inflight_max: int) -> bool:
        if self.state == "probe":
            return self.paused
        if self.state == "snapshot":
            return True
        return len(self.inflight) >= inflight_max

    def sent(self, last: int) -> None:
        """An append through ``last`` went out."""
        if self.state == "replicate":
            if last >= self.next:
                self.next = last + 1
                self.inflight.append(last)
        elif self.state == "probe":
            self.paused = True

    def acked(self, match: int) -> bool:
        """The replica holds the leader's log through ``match``; whether that is news."""
        while self.inflight and self.inflight[0] <= match:
            self.inflight.popleft()
        if match <= self.match:
            return False
        self.match = match
        self.next = max(self.next, match + 1)
        return True

    def refused(self, hint: int) -> None:
        """The replica's log does not hold the entry before ``next``: try from after
        ``hint`` (never at or below what it is known to hold)."""
        self.state, self.paused = "probe", False
        self.inflight.clear()
        self.next = max(self.match + 1, min(self.next - 1, hint + 1))


def quorum_index(config: Config, own_id: HostId, own_durable: int,
                 progress: dict[HostId, Progress]) -> int:
    """The highest index durable on a majority of the voters: the leader counts itself
    at what its own disk holds (thesis §10.2.1), the others at what they acked, if their
    acks count."""
    if not config.voters:
        return 0
    if config.voters == (own_id,):
        return own_durable  # a group of one: every owner step asks, so say it at once
    marks = sorted(
        (own_durable if voter == own_id
         else (progress[voter].match if voter in progress and progress[voter].counts else 0))
        for voter in config.voters
    )
    # The majority-th highest: sorted ascending, the index len − majority.
    return marks[len(marks) - config.majority()]
