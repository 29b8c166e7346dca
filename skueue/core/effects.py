"""Effects: what the core asks its driver to do.  Data only; the driver carries them out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skueue.core.ops import Item, QueueSettings
from skueue.overlay.labels import NodeRef


@dataclass(frozen=True, slots=True)
class Send:
    """Deliver ``message`` to the virtual node ``to`` (possibly of the same process)."""

    to: NodeRef
    message: Any

    def describe(self) -> str:
        desc = getattr(self.message, "describe", None)
        text = desc() if desc else repr(self.message)
        return f"send {self.to.describe()} {text}"


@dataclass(frozen=True, slots=True)
class Complete:
    """A client operation finished.

    ``value`` is the element a Dequeue/Pop returned (None = empty) or the element an
    Enqueue/Push inserted.  ``position`` and ``ord`` are what a checker needs to certify
    the history: the DHT position (None for an empty result or a locally combined pair)
    and the operation's rank in the anchor's serialization.
    """

    op_id: int
    value: Item | None
    ord: int
    position: int | None = None
    # The anchor refused the operation (its queue is of the other structure, or a new
    # queue found the cluster full): nothing was done, ``ord`` is -1, this says why.
    # Also a delete's or a configure's of a name that holds no queue (a delete keeps
    # its rank then: it is ordered among the name's operations like any delete).
    error: str | None = None
    # A delete's: how many elements it removed (``value`` and ``position`` are None).
    removed: int | None = None
    # A create's: True if it made the queue, False if it was made already (with the
    # same settings; other settings are an ``error``).  ``ord`` is -1.
    created: bool | None = None
    # A remove's: its queue's delivery limit (0: none), which its lease, if it has one,
    # keeps (skueue/core/leases.py).
    max_deliveries: int = 0
    # Why the anchor refused it (``ops.REFUSALS``; 0: it did not), with ``error``: a
    # driver that chose the structure for its client tries the other one on
    # ``REFUSED_OTHER_STRUCTURE``.
    refused: int = 0
    # A create's or a configure's: the queue's settings as they are now.
    settings: QueueSettings | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"complete #{self.op_id} refused: {self.error}"
        if self.removed is not None:
            return f"complete #{self.op_id} deleted {self.removed} ord={self.ord}"
        if self.created is not None:
            return f"complete #{self.op_id} {'created' if self.created else 'found'}"
        return f"complete #{self.op_id} value={self.value!r} ord={self.ord} pos={self.position}"


Effect = Send | Complete
