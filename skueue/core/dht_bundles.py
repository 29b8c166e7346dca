"""Bundling a step's DHT messages per destination node (issue 10: DHT traffic per cycle,
not per operation).

A node's batch turns into one Put or Get per operation, each to the key's owner, and each
owner answers every one; without bundling a cycle of ``k`` operations costs about ``2k``
messages between processes, however few processes they go to.  :func:`bundle_dht` takes
the effects of one step and puts the DHT messages for the same node into one
:class:`~skueue.core.messages.stages.DhtBundle`, which the receiver handles as if they
had come one by one.

Order: a bundle sits where its first message was.  Messages to other nodes have no order
with it anyway (they travel on other links), and a message of another kind to the same
node closes the bundle (later DHT messages start another), so every node receives what it
would have received, in the same order.  Size: a bundle stays under the byte budget the
driver gave for multi-part messages (its frame limit, with room), counting each element's
bytes plus a fixed overhead per message, and under ``DHT_BUNDLE_ITEMS_MAX`` messages; a
message too large for any bundle goes alone.

Runs: inside a bundle, requests for consecutive positions of one block and answers from
one owner travel as one message each (:mod:`skueue.core.dht_runs`); a bundle that is one
run goes as that run.
"""

from __future__ import annotations

from skueue.core.dht_runs import collapse
from skueue.core.effects import Effect, Send
from skueue.core.membership.state import HANDOVER_OVERHEAD_BYTES, element_bytes
from skueue.core.messages.stages import (
    DHT_BUNDLE_ITEMS_MAX,
    AnswerRun,
    DhtBundle,
    DhtMessage,
    DhtRun,
    GetReply,
    Put,
)
from skueue.overlay.labels import NodeRef

# A DHT message's bytes on the wire besides its element, generously: kind, ints, the
# requester's process id, an owner, a route (a few labels).
DHT_MESSAGE_OVERHEAD_BYTES = 256


def message_bytes(m: DhtMessage) -> int:
    if isinstance(m, DhtRun | AnswerRun):  # not made by a step, but counted right
        return DHT_MESSAGE_OVERHEAD_BYTES + sum(element_bytes(e) for e in m.elements)
    element = m.element if isinstance(m, Put | GetReply) else None
    return DHT_MESSAGE_OVERHEAD_BYTES + (0 if element is None else element_bytes(element))


def bundle_dht(effects: list[Effect], bytes_max: int) -> list[Effect]:
    """``effects`` with the DHT messages for each node bundled (see the module doc)."""
    budget = bytes_max - HANDOVER_OVERHEAD_BYTES
    out: list[Effect] = []
    # index in out -> the node and the messages bundled there
    groups: dict[int, tuple[NodeRef, list[DhtMessage]]] = {}
    open_at: dict[NodeRef, tuple[int, int]] = {}  # node -> (index in out, bytes so far)
    for effect in effects:
        if not isinstance(effect, Send):
            out.append(effect)
            continue
        message = effect.message
        if not isinstance(message, DhtMessage):
            open_at.pop(effect.to, None)  # later DHT messages must not overtake this one
            out.append(effect)
            continue
        size = message_bytes(message)
        slot = open_at.get(effect.to)
        if slot is not None:
            index, used = slot
            group = groups[index][1]
            if len(group) < DHT_BUNDLE_ITEMS_MAX and used + size <= budget:
                group.append(message)
                open_at[effect.to] = (index, used + size)
                continue
        open_at[effect.to] = (len(out), size)
        groups[len(out)] = (effect.to, [message])
        out.append(effect)
    for index, (to, group) in groups.items():
        if len(group) > 1:
            runs = collapse(group)
            out[index] = Send(to, runs[0] if len(runs) == 1 else DhtBundle(tuple(runs)))
    return out
