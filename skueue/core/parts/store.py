"""The DHT store of one node: the entries it is responsible for, and its own DHT
operations still on their way (SPEC §7).

Own removes wait in ``awaiting`` for their element; own Puts wait in ``unacked_puts``
for their acknowledgement.  An update phase's first stage waits until both are empty
(:meth:`Store.quiet`), so that no DHT message is overtaken while data moves.  ``owners``
remembers which node answered for which keys, so that the next request goes there
directly (:mod:`skueue.core.parts.key_owners`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skueue.core.intake import Assignment
from skueue.core.ops import Element
from skueue.core.parts.key_owners import KeyOwners
from skueue.dht.table import Table
from skueue.overlay.labels import NodeRef


@dataclass(slots=True)
class Store:
    table: Table[tuple[NodeRef, int], Element] = field(default_factory=Table)
    # Own removes waiting for their element: op_id -> assignment.
    awaiting: dict[int, Assignment] = field(default_factory=dict)
    # Own Puts not yet acknowledged (op_id -> position): an update phase waits until none
    # is on its way.
    unacked_puts: dict[int, int] = field(default_factory=dict)
    owners: KeyOwners = field(default_factory=KeyOwners)

    def quiet(self) -> bool:
        """No own Get waits for its element and no own Put for its acknowledgement."""
        return not self.awaiting and not self.unacked_puts
