"""Operation records and their JSON-lines form.

Theory of operation
-------------------
A history is the set of completed operations (SPEC §1).  Each completed
operation becomes one immutable :class:`Record`: who issued it (``process``
and its per-process issue number ``seq``), what it was (``op``), the element
it carried (the argument of an Enqueue/Push, the result of a Dequeue/Pop,
``None`` for "empty"), and its real-time interval ``[invoke, response]``.
Two optional fields come from the anchor's serialization: ``position`` (the
DHT slot) and ``ord`` (the rank of the operation in the anchor's order); a
history that carries ``ord`` on every record can be certified in
``O(n log n)`` instead of searched.  An optional ``phase`` says which part of a
run an operation belongs to; ``skueue bench`` marks its final drain ``"drain"``
so that throughput and latency leave it out while the checkers still see it.  An
optional ``queue`` names the queue of a cluster with named queues (issue 12; left out
for the default queue): each queue is its own object, with its own ``ord``.  An optional
``priority`` is the level an enqueue's element went to in a queue with priority levels
(issue 14; left out for level 0): a dequeue must return the oldest element of the most
urgent level that holds any.

The on-disk form is JSON Lines, one object per record, with exactly the field
names above (``position``/``ord``/``phase``/``queue`` left out when unknown).  Histories arrive
from other processes and from files people edit by hand, so reading is
strict: every malformed field raises :class:`HistoryError` naming the field
and, for files, the line.  Constructing a :class:`Record` directly does not
validate, because simulators build millions of them and already know they
are well formed; :func:`validate_history` checks a whole history at once.

Pure: stdlib and attrs only, no I/O beyond the file objects handed in.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import IO, Any, Final

import attrs

QUEUE_OPS: Final = frozenset({"enqueue", "dequeue", "peek"})
STACK_OPS: Final = frozenset({"push", "pop"})
INSERT_OPS: Final = frozenset({"enqueue", "push"})
REMOVE_OPS: Final = frozenset({"dequeue", "pop"})
PEEK: Final = "peek"
"""A queue's read of its head (issue 14): the element a dequeue would return, left in
it; ``value`` as a dequeue's.  Checked by the exact search and the certificate; the
pattern checks pass over peeks."""
OPS: Final = QUEUE_OPS | STACK_OPS

Time = float | int


class HistoryError(ValueError):
    """A record or a history is malformed (not merely inconsistent)."""


@attrs.frozen
class Record:
    """One completed operation."""

    process: str
    """Id of the issuing process."""
    seq: int
    """The process's issue order, from 0; program order is ``seq`` order."""
    op: str
    """One of ``enqueue``, ``dequeue``, ``push``, ``pop``."""
    value: str | None
    """Argument of enqueue/push; result of dequeue/pop (``None`` = empty)."""
    invoke: Time
    """When the client issued the operation."""
    response: Time
    """When the client received the result; never before ``invoke``."""
    position: int | None = None
    """DHT position the anchor assigned, if known."""
    ord: int | None = None
    """Rank in the anchor's serialization, if known; makes the history certifiable."""
    phase: str | None = None
    """Part of the run, if marked: ``"drain"`` for a bench's final drain, which belongs
    to the history (it is checked) but not to throughput or latency."""
    queue: str | None = None
    """The named queue the operation was on; None for the default queue."""
    priority: int | None = None
    """An enqueue's level in a queue with priority levels (0 the most urgent); None: 0."""

    @property
    def inserts(self) -> bool:
        return self.op in INSERT_OPS

    def describe(self) -> str:
        """Stable one-liner, e.g. ``B#1 dequeue -> x [5, 6] ord=3``."""
        if self.inserts:
            what = f"{self.op}({self.value})"
        else:
            what = f"{self.op} -> {'empty' if self.value is None else self.value}"
        extra = ""
        if self.position is not None:
            extra += f" pos={self.position}"
        if self.ord is not None:
            extra += f" ord={self.ord}"
        if self.phase is not None:
            extra += f" phase={self.phase}"
        if self.priority:
            extra += f" priority={self.priority}"
        return f"{self.process}#{self.seq} {what} [{self.invoke}, {self.response}]{extra}"


_REQUIRED: Final = ("process", "seq", "op", "value", "invoke", "response")


def record_to_json(r: Record) -> dict[str, Any]:
    d: dict[str, Any] = {
        "process": r.process,
        "seq": r.seq,
        "op": r.op,
        "value": r.value,
        "invoke": r.invoke,
        "response": r.response,
    }
    if r.position is not None:
        d["position"] = r.position
    if r.ord is not None:
        d["ord"] = r.ord
    if r.phase is not None:
        d["phase"] = r.phase
    if r.queue is not None:
        d["queue"] = r.queue
    if r.priority:
        d["priority"] = r.priority
    return d


def _is_int(x: object) -> bool:
    # bool is an int subclass; ``true`` in a seq field is a bug, not 1.
    return isinstance(x, int) and not isinstance(x, bool)


def _is_time(x: object) -> bool:
    return (_is_int(x) or isinstance(x, float)) and math.isfinite(x)  # type: ignore[arg-type]


def record_from_json(d: object) -> Record:
    """Build a record from one decoded JSON object; unknown keys are ignored."""
    if not isinstance(d, dict):
        raise HistoryError(f"record must be a JSON object, got {type(d).__name__}")
    for name in _REQUIRED:
        if name not in d:
            raise HistoryError(f"missing field {name!r}")
    process, seq, op, value = d["process"], d["seq"], d["op"], d["value"]
    invoke, response = d["invoke"], d["response"]
    if not isinstance(process, str) or not process:
        raise HistoryError(f"field 'process' must be a non-empty string, got {process!r}")
    if not _is_int(seq) or seq < 0:
        raise HistoryError(f"field 'seq' must be a non-negative integer, got {seq!r}")
    if op not in OPS:
        raise HistoryError(f"field 'op' must be one of {sorted(OPS)}, got {op!r}")
    if op in INSERT_OPS:
        if not isinstance(value, str):
            raise HistoryError(f"field 'value' of {op} must be a string, got {value!r}")
    elif value is not None and not isinstance(value, str):
        raise HistoryError(f"field 'value' of {op} must be a string or null, got {value!r}")
    if not _is_time(invoke):
        raise HistoryError(f"field 'invoke' must be a finite number, got {invoke!r}")
    if not _is_time(response):
        raise HistoryError(f"field 'response' must be a finite number, got {response!r}")
    if response < invoke:
        raise HistoryError(f"field 'response' ({response}) is before 'invoke' ({invoke})")
    optional: dict[str, int | None] = {}
    for name in ("position", "ord", "priority"):
        x = d.get(name)
        if x is not None and not _is_int(x):
            raise HistoryError(f"field {name!r} must be an integer or null, got {x!r}")
        optional[name] = x
    phase = d.get("phase")
    if phase is not None and (not isinstance(phase, str) or not phase):
        raise HistoryError(f"field 'phase' must be a non-empty string or null, got {phase!r}")
    if optional["priority"] is not None and not (op == "enqueue" and optional["priority"] >= 0):
        raise HistoryError("field 'priority' belongs to an enqueue and is not negative")
    queue = d.get("queue")
    if queue is not None and (not isinstance(queue, str) or not queue):
        raise HistoryError(f"field 'queue' must be a non-empty string or null, got {queue!r}")
    return Record(
        process=process,
        seq=seq,
        op=op,
        value=value,
        invoke=invoke,
        response=response,
        position=optional["position"],
        ord=optional["ord"],
        phase=phase,
        queue=queue,
        priority=optional["priority"] or None,
    )


def write_jsonl(records: Iterable[Record], file_obj: IO[str]) -> None:
    for r in records:
        file_obj.write(json.dumps(record_to_json(r)))
        file_obj.write("\n")


def read_jsonl(file_obj: Iterable[str]) -> list[Record]:
    """Read JSON Lines; blank lines are skipped; errors name the 1-based line."""
    records: list[Record] = []
    for lineno, line in enumerate(file_obj, start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise HistoryError(f"line {lineno}: invalid JSON: {e.msg}") from None
        try:
            records.append(record_from_json(d))
        except HistoryError as e:
            raise HistoryError(f"line {lineno}: {e}") from None
    return records


def structure_of(records: Iterable[Record]) -> str:
    """``"queue"`` or ``"stack"``; an empty history counts as a queue."""
    kinds = {r.op for r in records}
    if kinds <= QUEUE_OPS:
        return "queue"
    if kinds <= STACK_OPS:
        return "stack"
    raise HistoryError(f"history mixes queue and stack operations: {sorted(kinds)}")


def validate_history(records: Iterable[Record]) -> None:
    """Whole-history sanity checks that single records cannot make.

    Checks that ``(process, seq)`` is unique, that ``response >= invoke``,
    that ops are known and that every insert carries a value.  Gaps in
    ``seq`` are allowed: an operation that never completed is not part of
    the history.
    """
    seen: dict[tuple[str, int], Record] = {}
    for r in records:
        if r.op not in OPS:
            raise HistoryError(f"unknown op {r.op!r} in {r.describe()}")
        if r.response < r.invoke:
            raise HistoryError(f"response before invoke in {r.describe()}")
        if r.value is None and r.op in INSERT_OPS:
            raise HistoryError(f"{r.op} without a value: {r.describe()}")
        key = (r.process, r.seq)
        other = seen.get(key)
        if other is not None:
            raise HistoryError(
                f"two records share process {r.process!r} seq {r.seq}: "
                f"{other.describe()} and {r.describe()}"
            )
        seen[key] = r
