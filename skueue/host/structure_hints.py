"""What this daemon has seen of each queue's structure, so that a client need not say it
(issue 28 item 9: ``skueue dequeue -q undo`` on a stack used to fail with "'undo' is a
stack" unless ``--structure stack`` was repeated on every command).

Only the anchor knows a name's structure for sure, and a batch must say it (a stack's
operations combine in the buffer, a queue's do not).  So the host guesses: the structure
an operation, a create or a refusal last showed it for the name, else what the client
prefers for a new name (``push``/``pop``: a stack), else the daemon's.  A wrong guess
costs one cycle: the anchor refuses the operation, changing nothing, and the host sends it
again as the other structure (:class:`~skueue.host.host.Host`).  A hint is never
trusted over the anchor, so a stale one (the name was deleted and made again as the other
kind, through another member) only costs that one cycle.

Pure and deterministic like the rest of the host: a snapshot keeps the hints and a replay
learns them again in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skueue.core.effects import Complete
from skueue.core.ops import (
    QUEUES_MAX,
    REFUSED_OTHER_STRUCTURE,
    OpKind,
    Structure,
    insert_kind,
    remove_kind,
)

STRUCTURE_HINTS_MAX = QUEUES_MAX
"""Names whose structure a daemon remembers (a cluster holds at most ``QUEUES_MAX``
queues at once; names of deleted queues are forgotten oldest first past it)."""


@dataclass(slots=True)
class StructureHints:
    stacks: dict[str, bool] = field(default_factory=dict)  # name -> True for a stack
    names_max: int = STRUCTURE_HINTS_MAX

    def get(self, queue: str) -> bool | None:
        """True for a stack, False for a queue, None: not known here."""
        return self.stacks.get(queue)

    def learn(self, queue: str, stack: bool) -> None:
        if self.stacks.get(queue) is stack:
            return
        self.stacks.pop(queue, None)  # the newest last: the oldest goes first
        self.stacks[queue] = stack
        if len(self.stacks) > self.names_max:
            del self.stacks[next(iter(self.stacks))]

    def forget(self, queue: str) -> None:
        self.stacks.pop(queue, None)

    def learn_from(self, queue: str, kind: OpKind, done: Complete) -> None:
        """What the answer ``done`` to an operation of ``kind`` shows of the name's
        structure: a refusal for the other structure, a create's or configure's
        settings, an insert, a remove that got an element; a delete forgets it.  (An
        empty remove shows nothing: the name may hold no queue.)"""
        if done.refused == REFUSED_OTHER_STRUCTURE:
            self.learn(queue, kind.structure is Structure.QUEUE)  # the other one
        elif kind is OpKind.DELETE:
            self.forget(queue)
        elif done.error is not None:
            return
        elif done.settings is not None:
            self.learn(queue, done.settings.stack)
        elif kind in STRUCTURE_KINDS and (kind.inserts or done.value is not None):
            self.learn(queue, kind.structure is Structure.STACK)


STRUCTURE_KINDS = (OpKind.ENQUEUE, OpKind.DEQUEUE, OpKind.PUSH, OpKind.POP)


def other_kind(kind: OpKind) -> OpKind:
    """The same operation on the other structure (an enqueue's is a push)."""
    other = Structure.QUEUE if kind.structure is Structure.STACK else Structure.STACK
    return insert_kind(other) if kind.inserts else remove_kind(other)
