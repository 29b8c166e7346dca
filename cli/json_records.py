"""What the client commands print with ``--json``, one shape for every command.

An element (``dequeue``, ``peek``, ``consume``, ``dlq``) is ``{"base64": ...,
"text": UTF-8 text or null, "position": N}``: ``position`` is the number the queue's
anchor gave it, the one ``enqueue --json`` printed for it (consecutive within a queue,
each priority level in a range of its own, never reused, even after a delete); null
where the daemon did not say (a push and a pop of a stack that met in one batch).
``consume`` and ``dlq`` add its deliveries and why it came back.

``enqueue --json`` prints what an enqueue did, as Redis's LPUSH answers the new length:
``{"queue": NAME, "positions": [N, ...], "size": N}``, each element's position in order
and the queue's size asked right after (others' operations included; null when it could
not be had: the anchor unreachable, or the stats request failed).
"""

from __future__ import annotations

import base64
from typing import Any

from skueue.client.api import Client, Inserted
from skueue.client.errors import SkueueError
from skueue.core.ops import DEFAULT_QUEUE


def json_element(value: bytes, position: int | None = None) -> dict[str, Any]:
    try:
        text: str | None = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"base64": base64.b64encode(value).decode("ascii"), "text": text, "position": position}


async def queue_size(q: Client, queue: str | None) -> int | None:
    """The queue's size as the cluster's stats tell it now; None when they cannot.  The
    enqueue has happened by then: failing to say the size does not fail the command."""
    try:
        stats = await q.stats()
    except SkueueError:
        return None
    one = (stats.get("queues") or {}).get(queue or DEFAULT_QUEUE)
    size = one.get("size") if isinstance(one, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def enqueue_record(queue: str | None, inserted: list[Inserted], size: int | None) -> dict[str, Any]:
    return {
        "queue": queue or DEFAULT_QUEUE,
        "positions": [i.position for i in inserted],
        "size": size,
    }
