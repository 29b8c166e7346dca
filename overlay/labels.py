"""Labels of virtual nodes on the Linearized De Bruijn cycle (SPEC §2).

Labels are integer fractions of ``2**64``: the point ``x`` in ``[0, 1)`` is the integer
``floor(x * 2**64)``.  Integers keep the arithmetic exact and identical on every host,
which floats would not.

A process with id ``v`` runs three virtual nodes:

* middle ``m(v) = h(v)`` (mmh3, 64 bits),
* left ``m/2`` in ``[0, 1/2)``,
* right ``(m+1)/2`` in ``[1/2, 1)``.

Ties on the cycle are broken by ``(label, process id, kind)``; :attr:`NodeRef.key` is that
sort key, and every comparison of positions on the cycle goes through it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import mmh3

LABEL_BITS = 64
LABEL_SPACE = 1 << LABEL_BITS
HALF = LABEL_SPACE >> 1


class Kind(enum.IntEnum):
    """Which of its process's three virtual nodes a node is; the value is the tie-break rank."""

    LEFT = 0
    MIDDLE = 1
    RIGHT = 2


def middle_label(process_id: str) -> int:
    """The public pseudorandom label ``h(id)`` of a process's middle node."""
    return mmh3.hash64(process_id.encode("utf-8"), seed=0, signed=False)[0]


def left_label(middle: int) -> int:
    """``m/2``: the left node's label."""
    return middle >> 1


def right_label(middle: int) -> int:
    """``(m+1)/2``: the right node's label."""
    return (middle + LABEL_SPACE) >> 1


def label_for(middle: int, kind: Kind) -> int:
    if kind is Kind.LEFT:
        return left_label(middle)
    if kind is Kind.RIGHT:
        return right_label(middle)
    return middle


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A reference to one virtual node: what a node knows of another.

    The label is derived from the process id, but it is carried along so that
    a node can reason about positions without hashing again.
    """

    process: str
    kind: Kind
    label: int

    @property
    def key(self) -> tuple[int, str, int]:
        """Position on the cycle, ties broken by (label, process id, kind)."""
        return (self.label, self.process, int(self.kind))

    def sibling(self, kind: Kind) -> NodeRef:
        """The virtual node of the same process with the given kind."""
        return node_ref(self.process, kind)

    def describe(self) -> str:
        return f"{self.process}/{self.kind.name[0]}@{self.label / LABEL_SPACE:.6f}"


def node_ref(process_id: str, kind: Kind) -> NodeRef:
    return NodeRef(process_id, kind, label_for(middle_label(process_id), kind))


def process_nodes(process_id: str) -> tuple[NodeRef, NodeRef, NodeRef]:
    """The (left, middle, right) nodes of a process."""
    m = middle_label(process_id)
    return (
        NodeRef(process_id, Kind.LEFT, left_label(m)),
        NodeRef(process_id, Kind.MIDDLE, m),
        NodeRef(process_id, Kind.RIGHT, right_label(m)),
    )


def ring_order(nodes: list[NodeRef]) -> list[NodeRef]:
    """Sort nodes into cycle order (drivers and tests only: the protocol never holds the ring)."""
    return sorted(nodes, key=lambda n: n.key)
