"""De Bruijn routing towards ``pred(t)`` from local knowledge only (SPEC §2, paper Lemma 3).

Theory of operation
-------------------
The continuous De Bruijn graph on ``[0, 1)`` has two edges out of every point ``y``:
``y/2`` and ``(y+1)/2``.  Feeding it the first ``k`` bits of a target ``t``, least
significant first, drives *any* start point ``z`` to within ``2**-k`` of ``t``: each step
halves the old error and the bit it pushes in on top is a bit of ``t``.

The Linearized De Bruijn network realises those two edges at the middle nodes: a middle
node with label ``m`` has virtual edges to its own left (``m/2``) and right (``(m+1)/2``)
nodes.  So a message carries the *ideal* point ``z`` (:attr:`Route.point`) and, per bit,

1. takes the virtual edge from its current process's middle node to the left or right
   sibling, which lands half as far from the new ``z`` as the middle was from the old one;
2. walks along linear edges to a middle node near ``z`` (there the next bit starts).

Because the error of the real position halves on every virtual hop, the walks never have
to be exact: the real position stays within a few node gaps of ``z`` throughout, and after
the last bit a short linear walk reaches ``pred(t)``.

Decisions this module makes, each for a reason:

* ``k`` comes from the label gaps around the start node (``3n`` nodes share the cycle, so
  ``2**64 / gap`` estimates ``3n``); a node never knows ``n``.  A bit costs a virtual hop
  plus a walk of about two hops; a missing bit doubles the final walk (about ``3n / 2**k``
  nodes).  The balance lies near ``k = log2(n) - 1``; see :data:`BITS_OVER_LOG_3N`.
* The start process's middle label is the start point, and the first bit hops straight
  from whichever sibling holds the message (the three virtual nodes of a process are
  pairwise connected), which saves the hop to the middle.
* The walk to a middle node looks at both neighbours first (one of them is a middle node
  more often than not); otherwise it commits to one direction, towards ``z``, so it can
  never oscillate.  It never steps over the cycle edge: ``z`` is a point on the line
  ``[0, 1)`` and a middle node near ``1`` is far from a ``z`` near ``0`` for the halving
  that follows.  A walk that reaches the cycle edge turns around; every ring has a middle
  node, so the walk ends.
* A node that sees that it or its predecessor owns ``t`` short-cuts the rest: delivering
  early can only save hops.
* Only the final step towards ``pred(t)`` crosses the cycle edge, and only when ``t`` lies
  below the minimum label (then the maximum node owns it).

Every call either delivers or returns a neighbour (``pred``, ``succ`` or a sibling) that is
not the node itself.  A route takes at most ``k`` virtual hops, ``k - 1`` walks to a middle
node (each visits a node at most twice) and one monotone final walk, so it ends on every
correct static ring.  The routing state is a handful of
integers so that it travels inside messages unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from skueue.overlay.labels import LABEL_BITS, LABEL_SPACE, Kind, NodeRef
from skueue.overlay.view import View

# k = (estimate of log2(3n)) + BITS_OVER_LOG_3N: about log2(n) - 0.5 on average.  The
# estimate scatters by about a bit either way; bench/routing_hops.py --over-log-3n measured
# -3 and -2 best in mean and p99 for n = 16 .. 16384, while 0 (k about log2(n) + 1.5, the
# SPEC's calibration setting) costs about 15% more hops.  -2 rather than -3 keeps one bit in
# hand against the scatter: an underestimate costs more than an overestimate.
BITS_OVER_LOG_3N = -2


class Phase(enum.IntEnum):
    """Where a route is in its journey; the value is what goes on the wire."""

    BITS = 0  # at a node of the process whose middle label takes the next bit
    TO_MIDDLE = 1  # walking along linear edges to a middle node near ``point``
    FINAL = 2  # walking along linear edges to pred(target)


def _check_label(name: str, value: int) -> None:
    if not 0 <= value < LABEL_SPACE:
        raise ValueError(f"{name} {value} is not a label in [0, 2**64)")


@dataclass(frozen=True, slots=True)
class Route:
    """The routing state a message carries (plain ints and one IntEnum, for the wire).

    ``__post_init__`` rejects states no correct node produces (``ValueError``), so a
    decoder can turn a malformed route from a peer into a protocol error before routing
    trips over it.
    """

    target: int
    """The point ``t``; the route ends at ``pred(t)``."""
    bits: int
    """``k``: how many leading bits of ``t`` the De Bruijn phase consumes."""
    taken: int = 0
    """How many of those bits the route has consumed so far."""
    point: int = 0
    """The ideal continuous De Bruijn point ``z`` after ``taken`` bits."""
    phase: Phase = Phase.BITS
    """What the node holding the message does next (an int from the wire becomes a Phase)."""
    heading: int = 0
    """Committed walk direction while looking for a middle node: -1 pred, +1 succ, 0 none."""
    hops: int = 0
    """Hops taken so far (every edge counts, virtual or linear); for measurements only."""

    def __post_init__(self) -> None:
        # Frozen: the conversion of a wire int to a Phase has to go around __setattr__.
        object.__setattr__(self, "phase", Phase(self.phase))
        _check_label("target", self.target)
        if not 0 <= self.bits <= LABEL_BITS:
            raise ValueError(f"bits {self.bits} not in [0, {LABEL_BITS}]")
        if not 0 <= self.taken <= self.bits:
            raise ValueError(f"taken {self.taken} not in [0, bits={self.bits}]")
        _check_label("point", self.point)
        if self.heading not in (-1, 0, 1):
            raise ValueError(f"heading {self.heading} is not -1, 0 or 1")
        if self.hops < 0:
            raise ValueError(f"hops {self.hops} is negative")

    def describe(self) -> str:
        return (
            f"route t={self.target / LABEL_SPACE:.6f} {self.phase.name} "
            f"bit {self.taken}/{self.bits} z={self.point / LABEL_SPACE:.6f} "
            f"heading={self.heading:+d} hops={self.hops}"
        )


def is_responsible(view: View, point: int) -> bool:
    """True iff ``view.me`` is ``pred(point)``: ``me <= point < succ`` on the cycle.

    A point is compared with labels only; a node whose label equals the point owns it.
    The maximum node also owns everything below the minimum label (the cycle edge).
    """
    me, succ = view.me.label, view.succ.label
    if view.succ_across_cycle:
        return point >= me or point < succ
    return me <= point < succ


def _pred_is_responsible(view: View, point: int) -> bool:
    """Whether my predecessor owns ``point``; decidable because its successor is me."""
    if view.pred_across_cycle:
        # The predecessor is the maximum node: it owns what lies above it and below me.
        return point >= view.pred.label or point < view.me.label
    return view.pred.label <= point < view.me.label


def _estimate_bits(view: View) -> int:
    """``k`` from local knowledge, read off the two gaps around me.

    The two gaps sum to about ``2 * 2**64 / (3n)`` (a Gamma(2) variable), so
    ``floor(log2(2**65 / gaps))`` is log2(3n) = log2(n) + 1.6 give or take a bit
    (standard deviation about 1.1 bits, mean about log2(3n)).
    """
    gaps = (view.succ.label - view.pred.label) % LABEL_SPACE
    if gaps == 0:
        return LABEL_BITS
    log_3n = (2 * LABEL_SPACE // gaps).bit_length() - 1
    return max(1, min(LABEL_BITS, log_3n + BITS_OVER_LOG_3N))


def start_route(view: View, target: int) -> Route:
    """The route state for a message that starts at ``view.me`` towards ``pred(target)``."""
    bits = _estimate_bits(view)
    start = view.sibling(Kind.MIDDLE).label
    return Route(target=target, bits=bits, point=start, phase=Phase.BITS)


def _bit(route: Route) -> int:
    """Bit number ``taken`` of the top ``bits`` bits of the target, counted from the least
    significant of them."""
    return (route.target >> (LABEL_BITS - route.bits + route.taken)) & 1


def _step_towards_middle(view: View, route: Route) -> tuple[NodeRef, int]:
    """One linear step of the walk to a middle node near ``route.point``; the new heading."""
    z = route.point
    heading = route.heading
    if heading == 0:
        # The neighbours across the cycle edge are the extremes, a right and a left node,
        # so the kind test alone never snaps across it.
        near = [n for n in (view.pred, view.succ) if n.kind is Kind.MIDDLE]
        if near:
            # min() keeps the first on ties, so pred wins a tie: deterministic.
            return min(near, key=lambda n: abs(n.label - z)), 0
        heading = 1 if z > view.me.label else -1
    # Turn around at the cycle edge instead of stepping over it.
    if heading > 0 and view.succ_across_cycle:
        heading = -1
    elif heading < 0 and view.pred_across_cycle:
        heading = 1
    return (view.succ if heading > 0 else view.pred), heading


def next_hop(view: View, route: Route) -> tuple[NodeRef | None, Route]:
    """The next node for a message at ``view.me``, and the route state to send with it.

    ``None`` means ``view.me`` is ``pred(route.target)``: deliver here.  Otherwise the
    returned node is ``view.pred``, ``view.succ`` or a sibling of ``view.me``, never
    ``view.me`` itself.
    """
    me = view.me
    target = route.target
    if is_responsible(view, target):
        return None, route
    if _pred_is_responsible(view, target):
        return view.pred, replace(route, phase=Phase.FINAL, heading=0, hops=route.hops + 1)

    # Each pass either returns a hop or moves to a later phase (BITS -> TO_MIDDLE/FINAL
    # with ``taken`` one higher, TO_MIDDLE -> BITS at a middle node), so the loop is short.
    while True:
        if route.phase is Phase.BITS:
            if route.taken >= route.bits:
                route = replace(route, phase=Phase.FINAL, heading=0)
                continue
            bit = _bit(route)
            taken = route.taken + 1
            route = replace(
                route,
                taken=taken,
                point=(route.point + bit * LABEL_SPACE) >> 1,
                # After the last bit the landing node is already near t: walk there directly.
                phase=Phase.FINAL if taken == route.bits else Phase.TO_MIDDLE,
                heading=0,
            )
            kind = Kind.RIGHT if bit else Kind.LEFT
            if kind is me.kind:
                # Only at the start: the message already sits on the sibling this bit
                # leads to, so the virtual hop costs nothing.
                continue
            return me.sibling(kind), replace(route, hops=route.hops + 1)

        if route.phase is Phase.TO_MIDDLE:
            if me.kind is Kind.MIDDLE:
                route = replace(route, phase=Phase.BITS, heading=0)
                continue
            hop, heading = _step_towards_middle(view, route)
            return hop, replace(route, heading=heading, hops=route.hops + 1)

        # FINAL.  Not responsible, so either t lies below me (walk pred-ward; from the
        # minimum node that crosses the cycle edge to the maximum node, which owns t), or t
        # lies at or above succ, which is then not across the cycle edge.
        hop = view.pred if target < me.label else view.succ
        return hop, replace(route, hops=route.hops + 1)
