"""Client operations as the core sees them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

# Elements are opaque to the protocol: bytes from real clients, str in simulations.
Element = bytes | str


class Structure(enum.Enum):
    QUEUE = "queue"
    STACK = "stack"


class OpKind(enum.Enum):
    ENQUEUE = "enqueue"
    DEQUEUE = "dequeue"
    PUSH = "push"
    POP = "pop"

    @property
    def inserts(self) -> bool:
        """Enqueue and Push insert; they fill the odd runs of a batch."""
        return self in (OpKind.ENQUEUE, OpKind.PUSH)

    @property
    def structure(self) -> Structure:
        return Structure.QUEUE if self in (OpKind.ENQUEUE, OpKind.DEQUEUE) else Structure.STACK


def insert_kind(structure: Structure) -> OpKind:
    return OpKind.ENQUEUE if structure is Structure.QUEUE else OpKind.PUSH


def remove_kind(structure: Structure) -> OpKind:
    return OpKind.DEQUEUE if structure is Structure.QUEUE else OpKind.POP


@dataclass(frozen=True, slots=True)
class Op:
    """One client request.  ``op_id`` is unique within its process and increases in issue order."""

    op_id: int
    kind: OpKind
    value: Element | None = None

    def describe(self) -> str:
        arg = "" if self.value is None else f" {self.value!r}"
        return f"#{self.op_id} {self.kind.value}{arg}"
