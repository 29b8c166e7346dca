"""Which node stores which keys, as far as this node has seen: a shortcut for DHT requests.

Theory of operation
-------------------
A Put or Get routed through the De Bruijn graph crosses several processes on its way to
``pred(key)``.  The node that stores it answers (PutAck, GetReply) with its own interval
``[label, until)``, and the requesting node remembers it here, so that its next request
for a key in that interval goes to the owner in one hop.

Correctness never rests on this: a request sent this way carries no route, and the
receiver starts routing from itself (exactly as for a joiner's relayed request), so a
node that is no longer responsible passes it on.  What must never happen is a request
sent to a node that has *left*, because nobody would pass it on.  Nodes leave only in an
update phase, and every node enters every phase before any node leaves (the phase's
quiet stage waits for all).  So the remembered intervals are dropped when this node
enters a phase, and an answer teaches something only if its request went out after the
last phase began here (``issued``): an answer to an older request may describe a ring
that has changed since.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from skueue.overlay.labels import LABEL_SPACE, NodeRef

# Intervals remembered; past this the cache starts over (a ring has ~3 per process, and
# a node that talks to more owners than this gains little from any one of them).
KEY_OWNERS_MAX = 4096


@dataclass(slots=True)
class KeyOwners:
    # Sorted by start: (start, end, owner) with start < end, never overlapping.
    starts: list[int] = field(default_factory=list)
    spans: list[tuple[int, int, NodeRef]] = field(default_factory=list)
    # Own DHT requests sent since the last phase began here: only their answers teach.
    issued: set[int] = field(default_factory=set)

    def owner_of(self, key: int) -> NodeRef | None:
        i = bisect_right(self.starts, key) - 1
        if i >= 0:
            start, end, owner = self.spans[i]
            if start <= key < end:
                return owner
        return None

    def answered(self, op_id: int, owner: tuple[NodeRef, int] | None) -> None:
        """Own request ``op_id`` was answered by ``(node, until)``: the node responsible
        for ``[node.label, until)`` on the cycle (wrapping past the top when ``until`` is
        not above the label); None: the answer did not say."""
        if op_id not in self.issued:
            return
        self.issued.discard(op_id)
        if owner is None:
            return
        node, until = owner
        start = node.label
        if until > start:
            self._add(start, until, node)
        else:  # the maximum node: its interval wraps around the cycle
            self._add(start, LABEL_SPACE, node)
            if until > 0:
                self._add(0, until, node)

    def forget(self) -> None:
        """An update phase began here: the ring may change, and answers to requests
        sent before now describe the old one."""
        self.starts.clear()
        self.spans.clear()
        self.issued.clear()

    def _add(self, start: int, end: int, owner: NodeRef) -> None:
        i = bisect_right(self.starts, start) - 1
        if i >= 0 and self.spans[i] == (start, end, owner):
            return  # known already: the common case once the cache is warm
        if len(self.spans) >= KEY_OWNERS_MAX:
            self.starts.clear()
            self.spans.clear()
        # Drop what the new interval overlaps: it is the newer knowledge.
        lo = bisect_right(self.starts, start) - 1
        if lo >= 0 and self.spans[lo][1] <= start:
            lo += 1
        lo = max(lo, 0)
        hi = lo
        while hi < len(self.spans) and self.spans[hi][0] < end:
            hi += 1
        self.starts[lo:hi] = [start]
        self.spans[lo:hi] = [(start, end, owner)]
