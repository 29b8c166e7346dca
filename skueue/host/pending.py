"""A client request as the host tracks it while its operations run, and the host's
counters (:mod:`skueue.host.host`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from skueue.core.ops import DEFAULT_QUEUE, Element, OpKind
from skueue.host.retries import RetryKey


@dataclass(slots=True)
class Request:
    """One client request: its operations complete one by one, the reply goes when all have."""

    client: int
    rid: int
    inserts: bool
    results: list[Any]
    remaining: int
    # Answered with a timeout error already: its operations may still complete, but the
    # client was told the outcome is unknown, and nothing more is sent (unless it retries).
    timed_out: bool = False
    # ... and that error went to its client's connection: a client that has its answer
    # never sends the request again, so what it still removes is lost (and counted) when
    # it completes, not when the retry window forgets it.
    timeout_told: bool = False
    key: RetryKey | None = None  # a request its client may send again (host/retries.py)
    refused: str | None = None  # why the anchor refused its queue (then nothing was done)
    queue: str = DEFAULT_QUEUE
    kind: OpKind | None = None  # the operations' kind
    number: int = -1  # its first operation's id: unique in the process, the same in a replay
    # A blocking remove (in ``Host.waits`` while its wait lasts): an empty attempt goes
    # again, as a patient operation, until an element came or the wait ended
    # (:meth:`Host.end_wait`, logged).
    got: bool = False
    lease_ms: int = 0  # a leased remove's lease (0: none), and its delivery limit
    max_deliveries: int = 0
    # The structure was the host's guess, not the client's (structure_hints.py): a
    # refusal for the other structure sends the operations again as that one, once.
    # ``values``: an insert's, to send again; ``retried_from``: the first op id of the
    # second try (a refusal of an op from before it is one of the first try's).
    follow: bool = False
    values: list[Element] | None = None
    retried_from: int | None = None
    priority: int = 0
    # A consumer's fetch (wire: "fetch"): up to its count; the removes that found the
    # queue empty are no results and not counted as empty, and while it waits only its
    # first remove tries again each cycle.
    fetch: bool = False
    # A look (wire: "look", ``skueue dlq``): leased to be shown and returned as they
    # were; not counted as removed or leased unless the lease ends otherwise.
    look: bool = False


@dataclass(slots=True)
class Counters:
    inserted: int = 0
    removed: int = 0
    empty: int = 0
    dropped_results: int = 0  # results whose client went away before the reply
    retried: int = 0  # requests sent again that got their first attempt's outcome

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


COUNTER_NAMES = tuple(f.name for f in fields(Counters))
