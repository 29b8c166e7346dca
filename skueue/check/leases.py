"""The lease checker (issue 12, item 8): what leased delivery promises, checked on the
events the consumers recorded.

Theory of operation
-------------------
A consumer records one :class:`LeaseEvent` per thing it did: ``lease`` (a leased remove
got ``value``, with its lease id and delivery count), ``ack`` and ``nack`` (with the
answer: True, False, or None when the consumer died before it came), and ``close`` (its
connection closed: the harness that killed it, or the consumer itself at the end).
Times are one clock for all consumers (the harness's monotonic clock).

:func:`check_leases` then checks, per element:

- **nothing lost, nothing acked twice**: acked exactly once (an answer True), or still
  in the queue or its dead letters at the end; an ack whose answer never came may have
  taken effect, so an element with one is neither lost nor double-acked by it;
- **never held by two live leases at once**: a delivery must not complete before the
  previous lease of that element could have ended, i.e. before the earliest of its nack
  or ack, its deadline (the lease's request went out at ``invoke``, so the daemon's
  deadline is no earlier than ``invoke + lease_s``) and its consumer's ``close``;
- **delivery counts rise**: each delivery of an element counts more than the one before
  (deliveries into a buffer that a killed consumer never handed out are not recorded,
  so the counts may skip, never repeat or fall).

The order between redeliveries is the queue's own (a returned element is a new
insertion at the tail): the linearizability checkers see the plain operations.

On disk, lease events are JSON Lines, one object per event with the field names of
:class:`LeaseEvent` (the optional ones left out when unknown), read strictly like a
history (:func:`read_events`: a malformed field raises :class:`HistoryError` naming it
and the line).

Pure: attrs and json only, no I/O beyond the file objects handed in.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import IO, Any

import attrs

from skueue.check.history import HistoryError

EVENTS = ("lease", "ack", "nack", "close")


@attrs.frozen
class LeaseEvent:
    consumer: str  # the connection that held the lease
    event: str  # one of EVENTS
    invoke: float
    response: float
    value: str | None = None  # the element (None for "close")
    lease: int | None = None  # the lease id (unique per consumer)
    deliveries: int | None = None  # on "lease": this delivery's count
    lease_s: float | None = None  # on "lease": the lease's length
    ok: bool | None = None  # on "ack"/"nack": the answer; None: never came

    def describe(self) -> str:
        what = f"{self.event} {self.value} lease={self.lease}"
        if self.deliveries is not None:
            what += f" delivery={self.deliveries}"
        if self.ok is not None or self.event in ("ack", "nack"):
            what += f" -> {self.ok}"
        return f"{self.consumer} {what} [{self.invoke}, {self.response}]"


@attrs.frozen
class LeaseVerdict:
    problems: tuple[str, ...]
    elements: int
    acked: int
    redelivered: int
    indeterminate: int  # elements whose only ack never got its answer

    @property
    def ok(self) -> bool:
        return not self.problems


def check_leases(
    events: Iterable[LeaseEvent],
    inserted: Iterable[str],
    left: Sequence[str] = (),
    dead: Sequence[str] = (),
    taken: Sequence[str] = (),
) -> LeaseVerdict:
    """Check the consumers' ``events`` against the elements ``inserted`` (unique values)
    and what was ``left`` in the queue and its ``dead`` letters at the end; ``taken``:
    the elements removed for good by plain (unleased) removes, each as good as an ack."""
    events = list(events)
    for e in events:
        if e.event not in EVENTS:
            raise ValueError(f"unknown lease event {e.event!r}")
    closed = closes(events)
    by_value: dict[str, list[LeaseEvent]] = defaultdict(list)
    for e in events:
        if e.value is not None:
            by_value[e.value].append(e)
    problems: list[str] = []
    values = list(inserted)
    remaining: dict[str, int] = defaultdict(int)
    for v in (*left, *dead):
        remaining[v] += 1
    taken_count: dict[str, int] = defaultdict(int)
    for v in taken:
        taken_count[v] += 1
    indeterminate = redelivered = acked = 0
    for v in values:
        own = by_value.get(v, [])
        answers = [e.ok for e in own if e.event == "ack"]
        done = answers.count(True) + taken_count[v]
        acked += done > 0
        redelivered += sum(e.event == "lease" for e in own) > 1
        problems.extend(element_problems(v, own, closed))
        if done > 1 and taken_count[v]:
            acks = done - taken_count[v]
            problems.append(f"{v} was removed {taken_count[v]} time(s) and acked {acks}")
        if done and remaining[v]:
            problems.append(f"{v} was acked and is still there")
        elif remaining[v] > 1:
            problems.append(f"{v} is there {remaining[v]} times")
        if done + remaining[v] == 0:
            if None in answers:
                indeterminate += 1
            else:
                problems.append(f"{v} was lost: never acked, and not in the queue at the end")
    for v in by_value.keys() - set(values):
        problems.append(f"{v} was delivered but never inserted")
    return LeaseVerdict(tuple(problems), len(values), acked, redelivered, indeterminate)


def closes(events: Iterable[LeaseEvent]) -> dict[str, float]:
    """When each consumer's connection closed (its first ``close`` event)."""
    out: dict[str, float] = {}
    for e in events:
        if e.event == "close":
            out[e.consumer] = min(out.get(e.consumer, math.inf), e.invoke)
    return out


def element_problems(
    value: str, events: Sequence[LeaseEvent], closed: dict[str, float]
) -> list[str]:
    """What one element's own events break, needing nothing else (so ``skueue analyze``
    runs it per element): acked twice, leased twice at once, delivery counts that do not
    rise.  ``closed``: :func:`closes` of all the events."""
    out = []
    done = sum(1 for e in events if e.event == "ack" and e.ok is True)
    if done > 1:
        out.append(f"{value} was acked {done} times")
    ends: dict[tuple[str, int | None], float] = {}  # a lease's ack or nack, as invoked
    for e in events:
        if e.event in ("ack", "nack"):
            key = (e.consumer, e.lease)
            ends[key] = min(ends.get(key, math.inf), e.invoke)
    history = sorted((e for e in events if e.event == "lease"), key=lambda e: e.response)
    for before, after in zip(history, history[1:], strict=False):
        ended = min(
            ends.get((before.consumer, before.lease), math.inf),
            before.invoke + (before.lease_s if before.lease_s is not None else math.inf),
            closed.get(before.consumer, math.inf),
        )
        if after.response < ended:
            out.append(
                f"{value} was leased twice at once: {after.describe()} came while "
                f"{before.describe()} could still hold it"
            )
        if (before.deliveries or 0) >= (after.deliveries or 0):
            out.append(f"{value}: delivery {after.deliveries} came after {before.deliveries}")
    return out


def event_to_json(e: LeaseEvent) -> dict[str, Any]:
    return {k: v for k, v in attrs.asdict(e).items() if v is not None or k == "ok"}


def event_from_json(d: object) -> LeaseEvent:
    """One event from a decoded JSON object; unknown keys are ignored."""
    if not isinstance(d, dict):
        raise HistoryError(f"a lease event is a JSON object, not {type(d).__name__}")
    consumer, event = d.get("consumer"), d.get("event")
    if not isinstance(consumer, str) or not consumer:
        raise HistoryError(f"field 'consumer' must be a non-empty string, got {consumer!r:.40}")
    if event not in EVENTS:
        raise HistoryError(f"field 'event' must be one of {list(EVENTS)}, got {event!r:.40}")
    times = [d.get("invoke"), d.get("response")]
    if not all(_number(t) for t in times) or times[1] < times[0]:  # type: ignore[operator]
        raise HistoryError(f"fields 'invoke' <= 'response' must be finite numbers, got {times}")
    value = d.get("value")
    if (value is None) != (event == "close") or not isinstance(value, str | None):
        wanted = "null" if event == "close" else "a string"
        raise HistoryError(f"field 'value' of {event} must be {wanted}")
    lease, deliveries, lease_s, ok = (d.get(k) for k in ("lease", "deliveries", "lease_s", "ok"))
    if event != "close" and (type(lease) is not int or lease < 0):
        raise HistoryError(f"field 'lease' of {event} must be a non-negative integer")
    if event == "lease" and (type(deliveries) is not int or deliveries < 1):
        raise HistoryError("field 'deliveries' of a lease must be a positive integer")
    if lease_s is not None and not (_number(lease_s) and lease_s > 0):
        raise HistoryError("field 'lease_s' must be a positive number")
    if ok is not None and type(ok) is not bool:
        raise HistoryError("field 'ok' must be true, false or null")
    invoke, response = times
    return LeaseEvent(consumer, event, invoke, response, value, lease, deliveries, lease_s, ok)  # type: ignore[arg-type]


def _number(x: object) -> bool:
    return type(x) in (int, float) and math.isfinite(x)  # type: ignore[arg-type]


def write_events(events: Iterable[LeaseEvent], file_obj: IO[str]) -> None:
    for e in events:
        file_obj.write(json.dumps(event_to_json(e)) + "\n")


def read_events(file_obj: Iterable[str]) -> list[LeaseEvent]:
    """JSON Lines of lease events; blank lines are skipped; errors name the line."""
    out = []
    for lineno, line in enumerate(file_obj, start=1):
        if not line.strip():
            continue
        try:
            out.append(event_from_json(json.loads(line)))
        except json.JSONDecodeError as e:
            raise HistoryError(f"line {lineno}: invalid JSON: {e.msg}") from None
        except HistoryError as e:
            raise HistoryError(f"line {lineno}: {e}") from None
    return out
