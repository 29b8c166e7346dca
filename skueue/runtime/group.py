"""The daemon's side of its process's replication group (docs/replication.md §6.2): the
replica (:class:`~skueue.replication.node.ReplicaNode`), the writes its effects ask of
the input log, and the commit that lets a step's effects go out.

Stage 2a of docs/replication.md §11: every durable daemon runs its process as a group
of one voter, itself (``--replicas 1``).  It leads from its start (``Campaign``; the
``took_over`` entry of its term, then the host's ``TookOver`` input, which ends what the
last life's clients left).  Each input the owner logs in a step is one ``data`` entry,
proposed at the end of the step, written and synced (one fsync per step), and
committed by the replica's own ``Persisted``: only then does the owner send the step's
frames and replies.  A group of one commits at its own write, which :meth:`end_step`
checks; with more voters the owner will hold each step's effects until their entries
are committed (stage 2b).
"""

from __future__ import annotations

import random
from typing import Any

import msgpack

from skueue.replication.config import Config, HostId
from skueue.replication.effects import (
    AppendLocal,
    Commit,
    ReplicaEffect,
    RoleChanged,
    SaveHardState,
)
from skueue.replication.inputs import Applied, Campaign, Persisted, Propose, SnapshotTaken
from skueue.replication.node import ReplicaNode
from skueue.replication.settings import DurableState, ReplicaSettings
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.state import log


class ProcessGroup:
    def __init__(self, replica: HostId, input_log: InputLog, first_config: Config) -> None:
        """The replica ``replica`` as the input log left it (``first_config``: the
        group's voters when the log never snapshotted)."""
        index = input_log.index
        snapshot_index, snapshot_term, config = index.base or (0, 0, first_config)
        term, vote = index.hard_state
        durable = DurableState(config, term, vote, snapshot_index, snapshot_term,
                               index.bare_entries())  # fmt: skip
        # Election timeouts are drawn from it; they play no part in a group of one.
        rng = random.Random()
        self.node = ReplicaNode(replica, durable, ReplicaSettings(), rng, reader=input_log)
        self.input_log = input_log
        self.staged: list[bytes] = []
        """The records the owner logged in this step, packed."""
        self._packer = msgpack.Packer(use_bin_type=True)

    def take_over(self, now: float) -> int:
        """Lead the group: a group of one elects itself at once; its ``took_over`` entry
        is durable and committed on return.  Returns the new term."""
        self._carry_out(self.node.step(Campaign()))
        assert self.node.role == "leader", "a lone voter elects itself"
        self.end_step(now)
        return self.node.term

    def stage(self, record: list[Any]) -> None:
        """An input's log record: an entry of this step's proposal."""
        self.staged.append(self._packer.pack(record))

    def end_step(self, now: float) -> None:
        """Propose what the step logged, write and sync it, and commit it: called before
        anything of the step goes out."""
        node = self.node
        if self.staged:
            staged, self.staged = tuple(self.staged), []
            self._carry_out(node.step(Propose(staged)))
        self.input_log.sync(now)
        last = node.last_index
        if node.commit < last:
            term = node.term_at(last)
            assert term is not None
            self._carry_out(node.step(Persisted(last, term)))
        assert node.commit == last, "a group of one commits at its own write"

    def snapshot_position(self) -> tuple[int, int, Config]:
        """Where a snapshot taken now stands: the last committed entry (everything the
        host stepped, between steps), its term, and the configuration there."""
        node = self.node
        term = node.term_at(node.commit)
        assert term is not None
        return node.commit, term, node.log.config_at(node.commit)

    def snapshot_taken(self, index: int) -> None:
        """The input log holds a snapshot at ``index``: the replica forgets the terms
        before it.  (The host stepped every entry through it as the leader proposed
        it; the replica hears so only now, not at every step's commit.)"""
        self._carry_out(self.node.step(Applied(index)))
        self._carry_out(self.node.step(SnapshotTaken(index)))

    def _carry_out(self, effects: list[ReplicaEffect]) -> None:
        for effect in effects:
            match effect:
                case AppendLocal(index=index, entries=entries):
                    self.input_log.write_entries(index, entries)
                case SaveHardState(term=term, vote=vote):
                    self.input_log.save_hard_state(term, vote)
                case Commit():
                    pass  # the leader stepped each entry into the host as it proposed it
                case RoleChanged(role="leader", term=term):
                    log.info("leads its replication group", term=term, replica=self.node.host)
                case RoleChanged():
                    pass  # the steps of an election a lone voter wins at once
                case _:
                    raise AssertionError(f"a group of one voter made {effect!r:.200}")
