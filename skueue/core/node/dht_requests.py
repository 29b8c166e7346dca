"""DHT requests on their way (SPEC §7): the same request one hop further."""

from __future__ import annotations

from skueue.core.messages.stages import Drop, Get, Put
from skueue.overlay.routing import Route


def with_route(message: Put | Get | Drop, route: Route) -> Put | Get | Drop:
    """The same DHT request one hop further (built field by field: the message classes
    are another module's, and this needs nothing of how they are made)."""
    if isinstance(message, Put):
        return Put(route, message.position, message.element, message.ticket,
                   message.requester, message.op_id, message.ack, message.queue)  # fmt: skip
    if isinstance(message, Get):
        return Get(route, message.position, message.ticket, message.requester, message.op_id,
                   message.queue, message.keep)  # fmt: skip
    return Drop(route, message.position, message.ticket, message.requester, message.op_id,
                message.queue)  # fmt: skip
