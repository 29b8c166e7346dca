"""The membership part of a node: its join or leave in progress, the update phase it is
in, and handovers arriving in pieces (SPEC §8).

These are plain data; the transitions of Join, Leave and the update phase live in
:mod:`skueue.core.membership`, which receives this part with the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skueue.core.messages.membership import Departing, Entry, Integrate, IntegrateAck
from skueue.core.parts.ring import Ring
from skueue.overlay.labels import Kind, NodeRef

# The stages of an update phase, in order.
QUIET, JOINS, LEAVES, OVER = 1, 2, 3, 4

# Handovers (a leaver's entries to its predecessor, a joiner's from its responsible node)
# go in messages of at most this many bytes; drivers pass their own limit in.
HANDOVER_BYTES_MAX = 4 * 1024 * 1024


@dataclass(slots=True)
class JoinTicket:
    """A joining process's progress, shared by its three nodes (one process, one memory).

    A process joins as a whole: its left node reports the join (3 nodes) in a relayed
    batch once all three are placed, and the anchor counting it is what commits every
    responsible node to integrate its node in the next phase.  Integrating only some of
    a process's nodes would leave virtual edges into nodes outside the ring.
    """

    responsible: dict[Kind, NodeRef] = field(default_factory=dict)
    reported: bool = False
    counted: bool = False


@dataclass(slots=True, eq=False)
class LeaveTicket:
    """A leaving process's progress, shared by its three nodes.

    Like a join, a leave is the whole process's: its left node reports it (3 nodes) in its
    next batch, after the operations it still had, and the anchor counting that batch
    lets all three nodes go in the next phase, together.
    """

    rings: list[Ring] = field(repr=False)  # the ring parts of the process's three nodes
    reported: bool = False
    counted: bool = False

    def goes_now(self) -> bool:
        """Counted, and no node of the process places joiners that are not counted yet
        (they would lose their responsible node): then it waits for a later phase."""
        return self.counted and not any(r.joiners for r in self.rings)


@dataclass(slots=True)
class UpdatePhase:
    old_parent: NodeRef | None
    old_children: tuple[NodeRef, ...]
    stage: int = QUIET
    heard: set[NodeRef] = field(default_factory=set)  # old children done with ``stage``
    reported: bool = False  # StageDone for ``stage`` sent (or, at the root, acted on)
    duty_done: bool = False  # stages 2 and 3: this node's own part is finished
    acks: set[NodeRef] = field(default_factory=set)  # stage 2: acknowledgements awaited
    asked: NodeRef | None = None  # stage 3: the predecessor we asked whether we may go
    asked_all: set[NodeRef] = field(default_factory=set)  # ... and every one asked before
    granted: set[NodeRef] = field(default_factory=set)  # stage 3: leavers we let go
    absorber: NodeRef | None = None  # stage 3: who took our part
    absorbing: dict[NodeRef, NodeRef] = field(default_factory=dict)  # new succ -> leaver
    # A node integrated in this phase that took over joiners: its IntegrateAck waits
    # until each of them confirmed its new responsible node.
    moves_unconfirmed: set[NodeRef] = field(default_factory=set)
    integrate_ack: IntegrateAck | None = None
    integrated_by: NodeRef | None = None

    # -- the stages (update_phase.py) ---------------------------------------------------

    def begin(self, stage: int) -> None:
        """A new stage: nobody has reported it yet, and this node's part is open."""
        self.stage, self.reported, self.duty_done = stage, False, False
        self.heard = set()

    def hear(self, child: NodeRef) -> None:
        self.heard.add(child)

    def report(self) -> None:
        self.reported = True

    def end(self) -> None:
        self.stage = OVER

    def finish_duty(self) -> None:
        self.duty_done = True

    # -- stage 2, joins (joining.py) -----------------------------------------------------

    def await_acks(self, nodes: set[NodeRef]) -> None:
        self.acks = set(nodes)

    def acked(self, sender: NodeRef) -> None:
        """A node we integrated or rewired acknowledged; the duty of stage 2 is done when
        every one did."""
        self.acks.discard(sender)
        if self.stage == JOINS and not self.acks:
            self.duty_done = True

    def await_moves(self, joiners: set[NodeRef], ack: IntegrateAck, to: NodeRef) -> None:
        """Integrated with joiners to place: ``ack`` goes to ``to`` once all confirmed."""
        self.moves_unconfirmed = set(joiners)
        self.integrate_ack, self.integrated_by = ack, to

    def move_confirmed(self, joiner: NodeRef) -> tuple[IntegrateAck, NodeRef] | None:
        """A moved joiner confirmed; returns the IntegrateAck and its receiver when it was
        the last."""
        self.moves_unconfirmed.discard(joiner)
        if self.moves_unconfirmed or self.integrate_ack is None or self.integrated_by is None:
            return None
        ack, to = self.integrate_ack, self.integrated_by
        self.integrate_ack = self.integrated_by = None
        return ack, to

    # -- stage 3, leaves (leaving.py) ----------------------------------------------------

    def ask(self, pred: NodeRef) -> None:
        """A leaver asks its predecessor whether it may go."""
        self.asked = pred
        self.asked_all.add(pred)

    def grant(self, leaver: NodeRef) -> None:
        self.granted.add(leaver)

    def hand_to(self, pred: NodeRef) -> None:
        """This leaver handed its part to ``pred``."""
        self.absorber = pred

    def absorb(self, leaver: NodeRef, succ: NodeRef) -> None:
        """Took ``leaver``'s part over; its successor's SetPredAck finishes it."""
        self.granted.discard(leaver)
        self.absorbing[succ] = leaver

    def absorbed(self, succ: NodeRef) -> NodeRef | None:
        """``succ`` acknowledged its new predecessor: the leaver it came for, if any."""
        return self.absorbing.pop(succ, None)

    def describe(self) -> str:
        waiting = len(set(self.old_children) - self.heard)
        return (
            f"stage {self.stage}, {waiting} old children pending, duty "
            f"{'done' if self.duty_done else 'open'}, {len(self.acks)} acks pending"
        )


@dataclass(slots=True)
class Incoming:
    """Handovers that arrive in pieces, per sender: the pieces so far and the final
    message (Departing or Integrate) once it came.  Pieces and final message may arrive
    in any order; the handover is taken over when all are here."""

    parts: dict[NodeRef, dict[int, tuple[Entry, ...]]] = field(default_factory=dict)
    finals: dict[NodeRef, Departing | Integrate] = field(default_factory=dict)

    def complete(self, sender: NodeRef, final: Departing | Integrate) -> bool:
        return len(self.parts.get(sender, {})) == final.parts

    def take(self, sender: NodeRef, final: Departing | Integrate) -> list[Entry]:
        """All entries of a complete handover; forgets it."""
        parts = self.parts.pop(sender, {})
        self.finals.pop(sender, None)
        return [e for i in sorted(parts) for e in parts[i]] + list(final.entries)


@dataclass(slots=True)
class MembershipState:
    contact: NodeRef | None = None  # joining: where the join requests go
    join_wait_ticks: int = 0
    ticket: JoinTicket | None = None  # joining: shared by the process's nodes
    # Joiners placed here whose join the anchor counted: integrated in the next phase.
    counted_joiners: set[NodeRef] = field(default_factory=set)
    leave: LeaveTicket | None = None  # leaving: shared by the process's nodes
    phase: UpdatePhase | None = None
    phases_entered: int = 0  # update phases this node took part in (a counter for drivers)
    # Join requests that came during a phase: routed again when it is over.
    deferred_joins: list[NodeRef] = field(default_factory=list)
    # Handovers arriving in pieces (leaves and joins).
    incoming: Incoming = field(default_factory=Incoming)
    # Largest handover message this node sends: entries beyond it go in several pieces.
    handover_bytes_max: int = HANDOVER_BYTES_MAX
