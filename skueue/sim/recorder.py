"""Turning submissions and completions into history records (SPEC history format)."""

from __future__ import annotations

from dataclasses import dataclass, field

from skueue.check.history import Record
from skueue.core.effects import Complete
from skueue.core.levels import level_of
from skueue.core.ops import DEFAULT_QUEUE, Element, Op, plain_or_none


def as_text(value: Element | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", errors="backslashreplace")


@dataclass(slots=True)
class Recorder:
    """Collects one record per completed operation; times are whatever the driver uses."""

    open_ops: dict[tuple[str, int], tuple[Op, float]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    phase: str | None = None  # given to the records made while it is set

    def invoked(self, process: str, op: Op, now: float) -> None:
        self.open_ops[(process, op.op_id)] = (op, now)

    def completed(self, process: str, done: Complete, now: float) -> Record:
        op, invoke = self.open_ops.pop((process, done.op_id))
        value = plain_or_none(done.value if not op.kind.inserts else op.value)
        record = Record(
            process=process,
            seq=op.op_id,
            op=op.kind.value,
            value=as_text(value),
            invoke=invoke,
            response=now,
            position=done.position,
            ord=done.ord,
            queue=None if op.queue == DEFAULT_QUEUE else op.queue,
            # The level the element went to (issue 14), read off its position: the
            # daemon's, so a priority past the last level shows as the last.
            priority=insert_level(done.position) if op.kind.inserts else None,
            phase=self.phase,
        )
        self.records.append(record)
        return record

    @property
    def pending(self) -> int:
        return len(self.open_ops)


def insert_level(position: int | None) -> int | None:
    """An insert's priority level as a record holds it (None for level 0)."""
    return level_of(position) or None if position else None
