"""Batching: the node's ``W`` (own buffer and the batches its children sent) and ``B``
(the batch in flight with the layout of its sub-batches), SPEC §6.

Theory of operation
-------------------
Children's batches are filed under their sender until the node fires; firing takes the
own buffer and exactly one batch per current child, in a fixed order (own first, then
children in tree order), so that the grants coming back can be split in that order.  A
relayed joiner may take a batch back when it is integrated elsewhere: if the batch is
here it is dropped now, otherwise its number is remembered and it is dropped when it
comes.  A joining node whose batch will never be served puts its operations back in
front of its own buffer (:meth:`Batching.reclaim`).

Every change to these fields happens in this file; the node and the membership code
call these methods.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skueue.core.batch import Batches
from skueue.core.errors import ProtocolError
from skueue.core.intake import OwnBuffers
from skueue.overlay.labels import NodeRef


@dataclass(slots=True)
class InFlight:
    """``B``: the batch this node sent (or assigned) and how it was put together."""

    own: OwnBuffers
    layout: tuple[tuple[NodeRef | None, Batches], ...]  # None is the own buffer
    served: bool = False
    # Stack: own DHT operations not yet acknowledged; B is cleared when this empties.
    outstanding: set[int] = field(default_factory=set)
    number: int = 0  # the node's batch counter when this batch went up
    # Each child's batch number, which its grants carry back.
    child_numbers: dict[NodeRef, int] = field(default_factory=dict)
    reports_leave: bool = False  # the batch carries this node's own Leave
    reports_join: bool = False  # the batch carries this (joining) process's Join
    # Joining left node: JoinCounted acknowledgements awaited before the next batch.
    holds: set[NodeRef] = field(default_factory=set)
    parent: NodeRef | None = None  # where the batch went (None: assigned at the anchor)

    def done(self) -> bool:
        return self.served and not self.outstanding and not self.holds

    def empty(self) -> bool:
        """Nothing urgent in this batch: its parent may not know anybody waits."""
        return not any(b.urgent for _, b in self.layout)


@dataclass(slots=True)
class Batching:
    own: OwnBuffers = field(default_factory=OwnBuffers)
    child_batches: dict[NodeRef, Batches] = field(default_factory=dict)
    child_numbers: dict[NodeRef, int] = field(default_factory=dict)  # BatchUp.number of each
    inflight: InFlight | None = None
    # Batches of relayed joiners taken back before they came: dropped when they come.
    withdrawn: set[tuple[NodeRef, int]] = field(default_factory=set)
    batches_sent: int = 0
    largest_batch: int = 0  # most runs in any batch this node sent or assigned (Theorem 18/20)
    last_batch_operations: int = 0  # operations in the batch this node sent last (for logs)
    # Hurry hints received: the parent wants this node's next batch (cleared when it
    # fires); a child wants the grants for the batch it sent (cleared when this node's
    # own grants come, which is when the child's go down).
    hurried: bool = False
    grants_wanted: bool = False
    # Children asked to hurry since this node last fired: each is asked once per batch.
    hurry_sent: set[NodeRef] = field(default_factory=set)
    # The parent was asked to hurry for the batch in flight.
    hurry_up_sent: bool = False

    # -- stage 1 --------------------------------------------------------------------

    def file(self, sender: NodeRef, batch: Batches, number: int) -> None:
        """A child's batch arrived (one taken back already is dropped)."""
        if (sender, number) in self.withdrawn:
            self.withdrawn.discard((sender, number))
            return
        self.child_batches[sender] = batch
        self.child_numbers[sender] = number

    def can_fire(self, kids: tuple[NodeRef, ...]) -> bool:
        """Stage 1's condition: a tick now would send (or assign) a batch."""
        if self.inflight is not None or len(self.child_batches) < len(kids):
            return False
        return all(k in self.child_batches for k in kids)

    def fire(
        self,
        kids: tuple[NodeRef, ...],
        own_batch: Batches,
        *,
        reports_join: bool,
        parent: NodeRef | None,
    ) -> Batches:
        """``B := own + children``; returns the combined batch (its own part is
        ``own_batch``: the own buffer's batch with the membership counters)."""
        layout = ((None, own_batch), *((k, self.child_batches.pop(k)) for k in kids))
        self.inflight = InFlight(
            self.own,
            layout,
            number=self.batches_sent,
            child_numbers={k: self.child_numbers.pop(k) for k in kids},
            reports_leave=own_batch.leaves > 0,
            reports_join=reports_join,
            parent=parent,
        )
        self.own = self.own.next_buffer()
        self.hurried = False
        self.hurry_sent.clear()
        self.hurry_up_sent = False
        combined = own_batch
        for _, b in layout[1:]:
            combined = combined.combine(b)
        self.batches_sent += 1
        self.largest_batch = max(self.largest_batch, combined.runs)
        self.last_batch_operations = combined.operations
        return combined

    def urgent(self) -> bool:
        """Operations wait here, or a neighbour asked this node to hurry."""
        return self.hurried or self.grants_wanted or self.has_operations()

    def to_hurry(self, kids: tuple[NodeRef, ...], up: NodeRef | None) -> list[NodeRef]:
        """The neighbours this node waits for and has not asked to hurry yet (they are
        counted as asked now), each once per batch: the children whose batch is missing
        while this node still has to fire (or holds operations for its next batch), and
        the parent while the batch in flight has no grants and no operations (one with
        operations makes the parent urgent by itself)."""
        flight = self.inflight
        wanted: list[NodeRef] = []
        if flight is None or self.has_operations():
            wanted = [k for k in kids if k not in self.child_batches and k not in self.hurry_sent]
            self.hurry_sent.update(wanted)
        if (
            up is not None
            and flight is not None
            and not flight.served
            and not self.hurry_up_sent
            and flight.empty()
        ):
            self.hurry_up_sent = True
            wanted.append(up)
        return wanted

    # -- stages 3 and 4 ---------------------------------------------------------------

    def serve(self) -> InFlight:
        """The grants for ``B`` arrived."""
        flight = self.inflight
        if flight is None or flight.served:
            raise ProtocolError("grants without a batch in flight")
        flight.served = True
        self.grants_wanted = False
        return flight

    def settle(self) -> None:
        """Clear ``B`` once it is served and nothing of it is outstanding."""
        if self.inflight is not None and self.inflight.done():
            self.inflight = None

    def wait_for_own(self, op_id: int) -> None:
        """Stack: ``B`` stays until this own DHT operation finished (paper §VI)."""
        assert self.inflight is not None
        self.inflight.outstanding.add(op_id)

    def hold(self, joiner: NodeRef) -> None:
        """A joining left node: the next batch waits until ``joiner``'s responsible node
        acknowledged that the join was counted."""
        assert self.inflight is not None
        self.inflight.holds.add(joiner)

    def finished(self, op_id: int) -> None:
        """An own DHT operation finished."""
        flight = self.inflight
        if flight is not None and op_id in flight.outstanding:
            flight.outstanding.discard(op_id)
            self.settle()

    def release_hold(self, joiner: NodeRef) -> None:
        """A responsible node acknowledged that our join was counted."""
        if self.inflight is not None:
            self.inflight.holds.discard(joiner)
            self.settle()

    # -- membership -------------------------------------------------------------------

    def reclaim(self) -> InFlight:
        """Put an unserved batch's operations back in front of the own buffer, in order;
        returns the batch given up."""
        flight = self.inflight
        assert flight is not None
        ops = [*flight.own.ops, *self.own.all_ops()]
        self.own = OwnBuffers()
        for op in ops:
            self.own.add(op)
        self.inflight = None
        return flight

    def take_back(self, sender: NodeRef, number: int) -> None:
        """Drop batch ``number`` of a relayed joiner, now or when it comes (-1: none)."""
        if number < 0:
            return
        if sender in self.child_batches:
            del self.child_batches[sender]
            del self.child_numbers[sender]
        else:
            self.withdrawn.add((sender, number))

    # -- queries ----------------------------------------------------------------------

    def has_operations(self) -> bool:
        """Own operations or a child's batch wait for the next batch, and not only
        blocking dequeues' attempts (those ride the cycles as they come)."""
        return self.own.urgent or any(b.urgent for b in self.child_batches.values())
