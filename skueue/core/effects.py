"""Effects: what the core asks its driver to do.  Data only; the driver carries them out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skueue.core.ops import Item
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
    error: str | None = None
    # A delete's: how many elements it removed (``value`` and ``position`` are None).
    removed: int | None = None
    # A create's: True if it made the queue, False if it was made already (with the
    # same settings; other settings are an ``error``).  ``ord`` is -1.
    created: bool | None = None
    # A remove's: its queue's delivery limit (0: none), which its lease, if it has one,
    # keeps (skueue/core/leases.py).
    max_deliveries: int = 0

    def describe(self) -> str:
        if self.error is not None:
            return f"complete #{self.op_id} refused: {self.error}"
        if self.removed is not None:
            return f"complete #{self.op_id} deleted {self.removed} ord={self.ord}"
        if self.created is not None:
            return f"complete #{self.op_id} {'created' if self.created else 'found'}"
        return f"complete #{self.op_id} value={self.value!r} ord={self.ord} pos={self.position}"


Effect = Send | Complete
