"""The API's arguments as the wire takes them, checked before anything is sent: a bad one
raises at once (``ValueError``, or ``RequestRejected`` for one over the daemon's limits),
and large calls are split into requests that each fit the daemon's limits."""

from __future__ import annotations

from typing import Any

from skueue.client.errors import RequestRejected
from skueue.core.ops import queue_name_problem
from skueue.host.requests import LEASE_MS_MAX, MAX_DELIVERIES_MAX, WAIT_MS_MAX

# Room for a request frame's own fields (kind, rid, list header) and per-value headers.
FRAME_OVERHEAD_BYTES = 64
VALUE_OVERHEAD_BYTES = 5
# Room for a removed element's rank and position next to its value in a reply.
RESULT_OVERHEAD_BYTES = 32

Target = tuple[str | None, bool | None, bool | None]
"""The wire's queue, stack and prefer_stack (skueue/host/requests.py)."""


def target(queue: str | None, structure: str | None, stack_if_new: bool = False) -> Target:
    """The wire's (queue, stack, prefer_stack) for the API's arguments; a bad one raises
    at once.  Without ``structure`` the daemon takes the queue's own, and a new name is a
    stack if ``stack_if_new`` (push and pop), else of the daemon's structure."""
    if queue is not None:
        problem = queue_name_problem(queue)
        if problem is not None:
            raise RequestRejected(problem)
    if structure not in (None, "queue", "stack"):
        raise ValueError(f'structure must be "queue", "stack" or None, not {structure!r}')
    stack = None if structure is None else structure == "stack"
    return queue, stack, True if stack_if_new and stack is None else None


def wait_ms(wait: float | None) -> int | None:
    """A blocking remove's wait for the wire, in milliseconds (at least 1)."""
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait > 0:
        raise ValueError(f"wait must be a positive number of seconds, not {wait!r}")
    if wait * 1000 > WAIT_MS_MAX:
        raise RequestRejected(f"wait={wait} s is over the limit of {WAIT_MS_MAX // 1000} s")
    return max(1, round(wait * 1000))


def lease_ms(seconds: float) -> int:
    """A lease's length for the wire, in milliseconds (at least 1)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"lease must be a positive number of seconds, not {seconds!r}")
    if seconds * 1000 > LEASE_MS_MAX:
        raise RequestRejected(f"lease={seconds} s is over the limit of {LEASE_MS_MAX // 1000} s")
    return max(1, round(seconds * 1000))


def max_deliveries(limit: int | None) -> int | None:
    if limit is None:
        return None
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 1 <= limit <= MAX_DELIVERIES_MAX
    ):
        raise ValueError(f"max_deliveries must be an integer from 1 to {MAX_DELIVERIES_MAX}")
    return limit


def checked_int(name: str, value: object, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return value


def checked_count(count: object) -> int:
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"count must be a non-negative integer, not {count!r}")
    return count


def checked_value(v: Any, value_bytes_max: int) -> bytes:
    if not isinstance(v, bytes | bytearray | memoryview):
        raise TypeError(f"elements must be bytes, not {type(v).__name__}")
    value = bytes(v)
    if len(value) > value_bytes_max:
        raise RequestRejected(
            f"a value of {len(value)} bytes exceeds the limit of {value_bytes_max} "
            f"bytes per element (the daemon's value_bytes_max)"
        )
    return value


def insert_chunks(values: list[bytes], ops_max: int, frame_bytes_max: int) -> list[list[bytes]]:
    """Consecutive runs of ``values``, each within the per-request count and the frame
    size."""
    budget = frame_bytes_max - FRAME_OVERHEAD_BYTES
    chunks: list[list[bytes]] = []
    chunk: list[bytes] = []
    size = 0
    for v in values:
        cost = len(v) + VALUE_OVERHEAD_BYTES
        if chunk and (len(chunk) >= ops_max or size + cost > budget):
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(v)
        size += cost
    if chunk:
        chunks.append(chunk)
    return chunks
