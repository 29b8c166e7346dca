"""One group's Raft replica at one host: ``step(input) -> effects``, pure and
deterministic (docs/replication.md §7).

Theory of operation
-------------------
The rules are the Raft paper's (Ongaro and Ousterhout, 2014, Figure 2) with the
dissertation's extensions that a long-running group needs:

- **terms** (§5.1): every message carries one; an older one is refused with ours, a
  newer one is followed (unless it is a vote request we ignore, below);
- **elections** (§5.2, §5.4.1): a follower that heard nothing from a leader for its
  randomized timeout first asks a **pre-vote** (thesis §9.6: would you vote for me at
  term + 1?) and raises its term only if a majority would; a voter grants one vote per
  term, to a candidate whose log is at least as up to date as its own; a replica that
  heard from a leader within the least timeout ignores vote requests altogether
  (thesis §4.2.3), unless the leader itself asked for the election (``transfer``) or
  is the one asking (it restarted, and stands again);
- **replication** (§5.3): appends carry ``(prev_index, prev_term)``; a follower refuses
  a mismatch with a hint, replaces a conflicting tail, and acks only what is durable
  (``Send.after_sync``); the leader tracks each replica's progress (``progress.py``);
- **commit** (§5.4.2, thesis §10.2.1): the highest index durable on a majority, the
  leader counting itself only at what its own disk holds, and only an entry of the
  leader's term is committed by counting (earlier ones with it); every new leader
  appends ``took_over`` first, so it commits what it inherited at once;
- **CheckQuorum** (thesis §6.2): a leader that heard from no majority for an election
  timeout steps down, so a partitioned leader stops taking proposals;
- **membership** (thesis §4.1–4.3): single-server changes, in force once in the log,
  one at a time, only after the leader committed an entry of its term; learners get
  the log but neither vote nor count; a leader removed from the voters steps down once
  that change is committed;
- **leadership transfer** (thesis §3.10): proposals stop, the target is brought up to
  date, then told ``TimeoutNow``;
- **snapshots** (§7): once the driver says it saved its state as of an index, the log
  before it goes; a replica that needs what went gets the snapshot instead;
- **the amnesia guard** (docs/replication.md I6): a replica that may have lost acked
  writes neither votes, campaigns nor counts until it has caught up with a leader's
  commit index.
"""

from __future__ import annotations

from typing import Protocol

from skueue.replication.config import Config, ConfigChange, HostId, Promote, apply_change
from skueue.replication.effects import (
    AppendLocal,
    Commit,
    InstallSnapshot,
    ProposalRefused,
    ReplicaEffect,
    Role,
    RoleChanged,
    SaveHardState,
    Send,
    SendSnapshot,
)
from skueue.replication.inputs import (
    Applied,
    Campaign,
    ChangeConfig,
    Persisted,
    Propose,
    Received,
    ReplicaInput,
    SnapshotTaken,
    Tick,
    TransferLeader,
)
from skueue.replication.log import EntryReader, RaftLog
from skueue.replication.messages import (
    AppendEntries,
    AppendReply,
    Entry,
    Message,
    RequestVote,
    Snapshot,
    TimeoutNow,
    VoteReply,
)
from skueue.replication.progress import Progress, quorum_index
from skueue.replication.settings import DurableState, ReplicaSettings


class Draws(Protocol):
    """Where election timeouts come from: a ``random.Random`` the driver seeded."""

    def randrange(self, start: int, stop: int) -> int: ...


class ReplicaNode:
    def __init__(self, host: HostId, durable: DurableState, settings: ReplicaSettings,
                 rng: Draws, reader: EntryReader | None = None) -> None:
        self.host = host
        self.settings = settings
        self._rng = rng
        self.log = RaftLog(durable.snapshot_index, durable.snapshot_term, durable.config,
                           durable.entries, reader)
        self.term = durable.term
        self.vote: HostId | None = durable.vote
        self.role: Role = "follower"
        self.leader: HostId | None = None
        self.commit = durable.snapshot_index
        self.applied = durable.snapshot_index
        self.may_have_forgotten = durable.may_have_forgotten
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._timeout = self._draw_timeout()
        self._votes: dict[HostId, bool] = {}
        self.progress: dict[HostId, Progress] = {}
        self._term_start = 0
        """The index of this leader's ``took_over`` entry."""
        self.transfer_to: HostId | None = None
        self._transfer_elapsed = 0
        self._out: list[ReplicaEffect] = []

    # -- what a driver and a test read ------------------------------------------------

    @property
    def last_index(self) -> int:
        return self.log.last_index

    @property
    def config(self) -> Config:
        """The configuration in force: the last one in the log."""
        return self.log.config

    @property
    def snapshot_index(self) -> int:
        return self.log.snapshot_index

    def term_at(self, index: int) -> int | None:
        return self.log.term_at(index)

    def entry(self, index: int) -> Entry:
        return self.log.entry(index)

    def is_voter(self) -> bool:
        return self.host in self.log.config.voters

    # -- the one way in ---------------------------------------------------------------

    def step(self, event: ReplicaInput) -> list[ReplicaEffect]:
        self._out = []
        if isinstance(event, Received):
            self._received(event.sender, event.message)
        elif isinstance(event, Tick):
            self._tick()
        elif isinstance(event, Propose):
            self._propose(event.data)
        elif isinstance(event, Persisted):
            if self.log.term_at(event.index) == event.term and event.index > self.log.persisted:
                self.log.persisted = min(event.index, self.log.last_index)
                if self.role == "leader":
                    self._maybe_commit()
        elif isinstance(event, Applied):
            self.applied = max(self.applied, min(event.index, self.commit))
        elif isinstance(event, SnapshotTaken):
            if event.index <= min(self.applied, self.commit):
                self.log.compact(event.index)
        elif isinstance(event, ChangeConfig):
            self._change_config(event.change)
        elif isinstance(event, TransferLeader):
            self._transfer(event.to)
        elif isinstance(event, Campaign):
            if self.role != "leader" and self._may_campaign():
                self._campaign(pre_vote=self.settings.pre_vote, transfer=False)
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"not a replica input: {event!r}")
        out, self._out = self._out, []
        return out

    # -- time ---------------------------------------------------------------------------

    def _draw_timeout(self) -> int:
        ticks = self.settings.election_ticks
        return self._rng.randrange(ticks, 2 * ticks)

    def _tick(self) -> None:
        self._election_elapsed += 1
        if self.role == "leader":
            self._tick_leader()
            return
        if self._election_elapsed >= self._timeout and self._may_campaign():
            self._election_elapsed = 0
            self._campaign(pre_vote=self.settings.pre_vote, transfer=False)

    def _tick_leader(self) -> None:
        settings = self.settings
        if self.transfer_to is not None:
            self._transfer_elapsed += 1
            if self._transfer_elapsed >= (settings.transfer_ticks or settings.election_ticks):
                self.transfer_to = None  # the target did not take over: carry on
        if self._election_elapsed >= settings.election_ticks:
            self._election_elapsed = 0
            if settings.check_quorum and not self._heard_from_quorum():
                self._become_follower(self.term, None)
                return
            for pr in self.progress.values():
                pr.recent_active = False
        for pr in self.progress.values():
            if pr.state == "snapshot":
                pr.snapshot_ticks += 1
                if pr.snapshot_ticks >= settings.election_ticks:
                    pr.become_probe()  # the snapshot or its answer was lost: start over
        self._heartbeat_elapsed += 1
        if self._heartbeat_elapsed >= settings.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            for to in self.progress:
                self._heartbeat(to)

    def _heard_from_quorum(self) -> bool:
        active = {host for host, pr in self.progress.items() if pr.recent_active}
        active.add(self.host)
        return self.log.config.is_quorum(active)

    # -- roles --------------------------------------------------------------------------

    def _may_campaign(self) -> bool:
        return self.settings.campaigns and self.is_voter() and not self.may_have_forgotten

    def _save_hard_state(self) -> None:
        self._out.append(SaveHardState(self.term, self.vote))

    def _announce(self) -> None:
        self._out.append(RoleChanged(self.role, self.term, self.leader))

    def _become_follower(self, term: int, leader: HostId | None) -> None:
        changed = (self.role, self.term, self.leader) != ("follower", term, leader)
        if term > self.term:
            self.term, self.vote = term, None
            self._save_hard_state()
        self.role, self.leader = "follower", leader
        self._election_elapsed = 0
        self._timeout = self._draw_timeout()
        self.progress = {}
        self.transfer_to = None
        self._votes = {}
        if changed:
            self._announce()

    def _campaign(self, pre_vote: bool, transfer: bool) -> None:
        """Ask for votes (``pre_vote``: whether a majority would vote, first).
        ``transfer``: the leader asked for it, so voters do not ignore it."""
        voters = self.log.config.voters
        self._votes = {self.host: True}
        self.leader = None
        if pre_vote:
            self.role = "pre_candidate"
            self._announce()
            asked = self.term + 1
        else:
            self.role = "candidate"
            self.term += 1
            self.vote = self.host
            self._save_hard_state()
            self._announce()
            asked = self.term
        if self.log.config.is_quorum({self.host}):
            self._won()
            return
        for voter in voters:
            if voter != self.host:
                self._send(voter, RequestVote(asked, self.log.last_index, self.log.last_term,
                                              pre_vote=self.role == "pre_candidate",
                                              transfer=transfer))
        self._election_elapsed = 0
        self._timeout = self._draw_timeout()

    def _won(self) -> None:
        if self.role == "pre_candidate":
            self._campaign(pre_vote=False, transfer=False)  # a majority would vote: now ask
            return
        self._become_leader()

    def _become_leader(self) -> None:
        self.role, self.leader = "leader", self.host
        self._election_elapsed = self._heartbeat_elapsed = 0
        self._votes = {}
        self.transfer_to = None
        last = self.log.last_index
        self.progress = {
            host: Progress(next=last + 1, recent_active=True)
            for host in self.log.config.members if host != self.host
        }
        self._announce()
        self._term_start = last + 1
        self._append((Entry(self.term, "took_over"),))

    # -- proposals and membership -----------------------------------------------------

    def _refuse(self, reason: str) -> None:
        self._out.append(ProposalRefused(self.leader, self.term, reason))

    def _not_taking(self) -> str | None:
        """Why this replica takes no proposal or change now (None: it does)."""
        if self.role != "leader":
            return "not the leader"
        if self.transfer_to is not None:
            return f"handing leadership over to {self.transfer_to}"
        return None

    def _propose(self, data: tuple[bytes, ...]) -> None:
        why = self._not_taking()
        if why is not None:
            self._refuse(why)
        elif data:
            self._append(tuple(Entry(self.term, "data", d) for d in data))

    def _append(self, entries: tuple[Entry, ...]) -> None:
        """The leader adds entries to its log and sends them on (before its own write
        is durable: it counts itself only once it is, thesis §10.2.1)."""
        index = self.log.last_index + 1
        self.log.append(entries)
        self._out.append(AppendLocal(index, entries))
        members = self.log.config.members
        for config_host in members:
            if config_host != self.host and config_host not in self.progress:
                self.progress[config_host] = Progress(next=index, recent_active=True)
        for to in [to for to in self.progress if to not in members]:
            del self.progress[to]
        for to in self.progress:
            self._send_append(to)
        self._maybe_commit()  # a group of one commits at its own write

    def _change_config(self, change: ConfigChange) -> None:
        why = self._not_taking()
        if why is not None:
            self._refuse(why)
            return
        if self.commit < self._term_start:
            self._refuse("no entry of this leader's term is committed yet")
            return
        if self.log.config_index > self.commit:
            self._refuse("the last membership change is not committed yet")
            return
        if isinstance(change, Promote):
            pr = self.progress.get(change.host)
            if pr is None or pr.match < self.commit:
                self._refuse(f"{change.host} has not caught up yet")
                return
        after = apply_change(self.log.config, change)
        if isinstance(after, str):
            self._refuse(after)
            return
        self._append((Entry(self.term, "config", config=after),))

    def _transfer(self, to: HostId) -> None:
        if self.role != "leader":
            self._refuse("not the leader")
        elif to == self.host:
            self._refuse("already the leader")
        elif to not in self.log.config.voters:
            self._refuse(f"{to} is not a voter of the group")
        else:
            self.transfer_to, self._transfer_elapsed = to, 0
            if self.progress[to].match == self.log.last_index:
                self._send(to, TimeoutNow(self.term))
            else:
                self._send_append(to)

    # -- the leader sends ---------------------------------------------------------------

    def _send_append(self, to: HostId, heartbeat: bool = False) -> None:
        pr = self.progress[to]
        if pr.state == "snapshot":
            return
        prev = pr.next - 1
        prev_term = self.log.term_at(prev)
        if prev_term is None:
            self._send_snapshot(to, pr)
            return
        paused = pr.is_paused(self.settings.inflight_appends_max)
        if paused and not heartbeat:
            return
        entries: tuple[Entry, ...] = ()
        if pr.next <= self.log.last_index and not paused:
            entries = self.log.between(pr.next, self.settings.append_bytes_max,
                                       self.settings.append_entries_max)
        # Else a heartbeat (nothing new, or the pipe is full), at the last index sent, not
        # at ``match``: if an append on the way was lost, the replica refuses it and the
        # refusal sends the progress back to probe, which sends the entries again; acked
        # at ``match``, an entry whose appends were all lost would never go again while
        # nothing new is proposed (Raft §5.3).
        commit = min(self.commit, prev + len(entries))
        self._send(to, AppendEntries(self.term, prev, prev_term, entries, commit))
        if entries or pr.state == "probe":
            pr.sent(prev + len(entries))

    def _heartbeat(self, to: HostId) -> None:
        pr = self.progress[to]
        if pr.state == "probe":
            pr.paused = False  # the last probe or its answer may be lost: ask again
        self._send_append(to, heartbeat=True)

    def _send_snapshot(self, to: HostId, pr: Progress) -> None:
        log = self.log
        pr.become_snapshot(log.snapshot_index)
        self._out.append(SendSnapshot(to, self.term, log.snapshot_index, log.snapshot_term,
                                      log.snapshot_config))

    def _send(self, to: HostId, message: Message) -> None:
        # Only what a leader sends of its log may leave before the local writes are
        # durable: everything else speaks for the hard state or the log (I7).
        early = self.role == "leader" and isinstance(message, AppendEntries | TimeoutNow)
        self._out.append(Send(to, message, after_sync=not early))

    # -- commit -------------------------------------------------------------------------

    def _maybe_commit(self) -> None:
        index = quorum_index(self.log.config, self.host, self.log.persisted, self.progress)
        if index <= self.commit or self.log.term_at(index) != self.term:
            return  # Raft §5.4.2: an earlier term's entry is never committed by counting
        self.commit = index
        self._out.append(Commit(index))
        if not self.is_voter() and self.commit >= self.log.config_index:
            self._become_follower(self.term, None)  # removed, and the removal is committed

    # -- messages -----------------------------------------------------------------------

    def _received(self, sender: HostId, m: Message) -> None:
        if m.term > self.term:
            if isinstance(m, RequestVote):
                recent_leader = (self.leader is not None
                                 and self._election_elapsed < self.settings.election_ticks)
                if (self.settings.check_quorum and recent_leader and not m.transfer
                        and sender != self.leader):  # fmt: skip
                    # Thesis §4.2.3: a working leader is not deposed by a stray.  The
                    # leader itself asking is no stray: it restarted, and stands again.
                    return
                if not m.pre_vote:
                    self._become_follower(m.term, None)
            elif isinstance(m, VoteReply) and m.pre_vote and m.granted:
                pass  # a grant for the term we asked about: counted below
            else:
                leader = sender if isinstance(m, AppendEntries | Snapshot) else None
                self._become_follower(m.term, leader)
        elif m.term < self.term:
            if isinstance(m, AppendEntries | Snapshot):
                # An old leader: tell it our term, so that it steps down.
                self._send(sender, AppendReply(self.term, 0, reject=True))
            elif isinstance(m, RequestVote) and m.pre_vote:
                self._send(sender, VoteReply(self.term, granted=False, pre_vote=True))
            return
        if isinstance(m, AppendEntries):
            self._heard_from_leader(sender)
            self._take_append(sender, m)
        elif isinstance(m, Snapshot):
            self._heard_from_leader(sender)
            self._take_snapshot(sender, m)
        elif isinstance(m, AppendReply):
            self._take_append_reply(sender, m)
        elif isinstance(m, RequestVote):
            self._take_vote_request(sender, m)
        elif isinstance(m, VoteReply):
            self._take_vote_reply(sender, m)
        elif isinstance(m, TimeoutNow) and self.role != "leader" and self._may_campaign():
            self._campaign(pre_vote=False, transfer=True)

    def _heard_from_leader(self, sender: HostId) -> None:
        if self.role != "follower" or self.leader != sender:
            self._become_follower(self.term, sender)
        self._election_elapsed = 0

    def _take_append(self, sender: HostId, m: AppendEntries) -> None:
        log = self.log
        if m.prev_index < self.commit:
            # Everything through our commit index is the leader's already (Leader
            # Completeness); say so, and let the leader go on from there.
            self._send(sender, AppendReply(self.term, self.commit, reject=False,
                                           counts=not self.may_have_forgotten))
            return
        if log.term_at(m.prev_index) != m.prev_term:
            hint = log.conflict_hint(m.prev_index, m.prev_term)
            self._send(sender, AppendReply(self.term, hint, reject=True,
                                           counts=not self.may_have_forgotten))
            return
        index = m.prev_index + 1
        for offset, entry in enumerate(m.entries):
            at = index + offset
            if log.term_at(at) != entry.term:
                if at <= log.last_index:
                    assert at > self.commit, "a committed entry is never replaced"
                    log.truncate_from(at)
                fresh = m.entries[offset:]
                log.append(fresh)
                self._out.append(AppendLocal(at, fresh))
                break
        last_new = m.prev_index + len(m.entries)
        if self.may_have_forgotten and last_new >= m.commit:
            self.may_have_forgotten = False  # it holds all the leader had committed
        self._advance_commit(min(m.commit, last_new))
        self._send(sender, AppendReply(self.term, last_new, reject=False,
                                       counts=not self.may_have_forgotten))

    def _advance_commit(self, index: int) -> None:
        if index > self.commit:
            self.commit = index
            self._out.append(Commit(index))

    def _take_snapshot(self, sender: HostId, m: Snapshot) -> None:
        log = self.log
        if m.index <= self.commit:
            self._send(sender, AppendReply(self.term, self.commit, reject=False,
                                           counts=not self.may_have_forgotten))
            return
        if log.term_at(m.index) == m.last_term:
            # The log already holds it: nothing to install, everything before agrees.
            self._advance_commit(m.index)
        else:
            log.restore(m.index, m.last_term, m.config)
            self.commit = self.applied = m.index
            self._out.append(InstallSnapshot(m.index, m.last_term, m.config, m.data))
        self.may_have_forgotten = False  # it holds all the leader had when it snapshotted
        self._send(sender, AppendReply(self.term, m.index, reject=False))

    def _take_append_reply(self, sender: HostId, m: AppendReply) -> None:
        pr = self.progress.get(sender)
        if self.role != "leader" or pr is None:
            return
        pr.recent_active = True
        pr.counts = m.counts
        if m.reject:
            if pr.state == "snapshot":
                # An answer to an append from before the snapshot went (none goes while
                # it is on its way): the snapshot's own answer, or its timeout, moves on.
                # Taken, it would send the whole snapshot again for each such answer.
                return
            if m.match_index < pr.match:
                if m.counts:
                    return  # a late answer to an append from before what it acked since
                pr.match = m.match_index  # it forgot what it acked (I6): start over lower
            pr.refused(m.match_index)
            self._send_append(sender)
            return
        match = min(m.match_index, self.log.last_index)
        news = pr.acked(match)
        if pr.state == "probe" or (pr.state == "snapshot" and pr.match >= pr.snapshot_index):
            pr.become_replicate()
        if news:
            self._maybe_commit()
        if self.role != "leader":
            return  # the commit removed this leader
        if sender == self.transfer_to and pr.match == self.log.last_index:
            self._send(sender, TimeoutNow(self.term))
        while (pr.next <= self.log.last_index
               and not pr.is_paused(self.settings.inflight_appends_max)):
            self._send_append(sender)

    def _take_vote_request(self, sender: HostId, m: RequestVote) -> None:
        can_vote = (self.vote == sender
                    or (self.vote is None and self.leader is None)
                    or (m.pre_vote and m.term > self.term))
        grant = (can_vote and not self.may_have_forgotten
                 and self.log.is_up_to_date(m.last_index, m.last_term))
        if not grant:
            self._send(sender, VoteReply(self.term, granted=False, pre_vote=m.pre_vote))
            return
        if not m.pre_vote:
            self.vote = sender
            self._election_elapsed = 0
            self._save_hard_state()
        self._send(sender, VoteReply(m.term, granted=True, pre_vote=m.pre_vote))

    def _take_vote_reply(self, sender: HostId, m: VoteReply) -> None:
        if m.pre_vote != (self.role == "pre_candidate") or self.role not in (
                "pre_candidate", "candidate"):
            return
        asked = self.term + 1 if m.pre_vote else self.term
        if m.granted and m.term != asked:
            return
        self._votes[sender] = m.granted
        config = self.log.config
        if config.is_quorum({h for h, yes in self._votes.items() if yes}):
            self._won()
        elif config.is_quorum({h for h, yes in self._votes.items() if not yes}):
            self._become_follower(self.term, None)
