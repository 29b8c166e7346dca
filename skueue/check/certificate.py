"""Certificate check: verify the anchor's serialization instead of searching for one.

Theory of operation
-------------------
Skueue's anchor serializes every operation; a completed operation reports
its rank ``ord`` in that serialization.  If the ords describe an admissible
order, the history is consistent, and checking that takes ``O(n log n)``
(the sort) however large the history.  The certificate is the *claim* of
the system under test, so nothing in it is trusted: a wrong certificate
yields a failed verdict that says which check failed, never a pass.

In one pass in ``ord`` order, each record must:

- carry an ``ord``, unique across the history;
- come after the previous record of its own process in ``seq`` order
  (program order);
- for linearizability, not have responded before an op with a lower ord was
  invoked: keeping the running maximum of ``invoke`` over lower ords makes
  that an O(1) test per record, and covers every real-time pair, since
  ``a.response < b.invoke`` with ``ord(b) < ord(a)`` is exactly
  ``a.response < max invoke before a``;
- replay correctly on a plain ``collections.deque``, the deliberately
  simple oracle: inserts append, a queue removal must equal ``popleft()``, a
  stack removal must equal ``pop()``, and "empty" is right iff the deque is
  empty.  Inserted values must be unique (the model's precondition).  A queue
  with priority levels (records with a ``priority``) has a deque per level, and a
  removal must equal ``popleft()`` of the most urgent one that is not empty.  A peek
  must equal what that removal would return, and leaves the deque as it was.

A drained run must also end with the deque empty.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from skueue.check.history import PEEK, Record


def find_violation_certificate(
    records: Sequence[Record], *, structure: str, realtime: bool, drained: bool
) -> str | None:
    """None if the ords certify the history, else the first failed check."""
    for r in records:
        if r.ord is None:
            return f"no ord on record {r.describe()}: a certificate needs an ord on every record"
    order = sorted(records, key=lambda r: r.ord)  # type: ignore[arg-type, return-value]
    queue = structure == "queue"
    contents: deque[str] = deque()
    levels: dict[int, deque[str]] = {0: contents}  # a queue with priority levels
    inserted: dict[str, Record] = {}
    last_of: dict[str, Record] = {}
    prev: Record | None = None
    latest: Record | None = None  # lowest-ord-so-far record with the largest invoke
    for r in order:
        if prev is not None and prev.ord == r.ord:
            return (
                f"certificate: ord {r.ord} is on two records, {prev.describe()} and {r.describe()}"
            )
        prev = r
        before = last_of.get(r.process)
        if before is not None and before.seq > r.seq:
            return (
                f"certificate breaks program order: {before.describe()} has a lower ord "
                f"than {r.describe()} but a higher seq"
            )
        last_of[r.process] = r
        if realtime and latest is not None and r.response < latest.invoke:
            return (
                f"certificate breaks real time: {r.describe()} responded before "
                f"{latest.describe()} was invoked, but has the higher ord"
            )
        if latest is None or r.invoke > latest.invoke:
            latest = r
        v = r.value
        if r.inserts:
            assert v is not None
            if v in inserted:
                return (
                    f"duplicate: {v!r} inserted twice, by {inserted[v].describe()} and "
                    f"{r.describe()} (elements must be unique)"
                )
            inserted[v] = r
            levels.setdefault(r.priority or 0, deque()).append(v)
            continue
        if len(levels) > 1:  # a queue with priority levels: the most urgent level's head
            contents = next((levels[k] for k in sorted(levels) if levels[k]), levels[0])
        if v is None:
            if contents:
                held = contents[0] if queue else contents[-1]
                return (
                    f"certificate replay: {r.describe()} returned empty, but {held!r} "
                    f"(and {len(contents) - 1} more) was in the {structure}"
                )
            continue
        if not contents:
            return (
                f"certificate replay: {r.describe()} returned {v!r}, but the {structure} was empty"
            )
        if r.op == PEEK:
            if contents[0] != v:
                return (
                    f"certificate replay: {r.describe()} saw {v!r}, but {contents[0]!r} was at "
                    "the front"
                )
            continue
        got = contents.popleft() if queue else contents.pop()
        if got != v:
            where = "front" if queue else "top"
            return (
                f"certificate replay: {r.describe()} returned {v!r}, but {got!r} was at the "
                f"{where}" + ("" if v in inserted else f" ({v!r} was never inserted before it)")
            )
    left = [v for k in sorted(levels) for v in levels[k]]
    if drained and left:
        return (
            f"certificate replay: the run drained, but {len(left)} element(s) remain, "
            f"e.g. {inserted[left[0]].describe()}"
        )
    return None


def peek_violations(records: Sequence[Record]) -> list[str]:
    """Every peek judged alone, in ``ord`` order: it must have seen the head a removal
    would take at its rank (the oldest element of the most urgent level), or nothing when
    the queue held nothing.  Removals are replayed as they came out (the element each
    returned leaves wherever it is), so a peek is judged on its own even where the rest
    of the history breaks the certificate (:func:`find_violation_certificate` says how).
    ``skueue analyze`` checks peeks with this, beside its distributed certificate."""
    levels: dict[int, deque[str]] = {}
    level_of: dict[str, int] = {}
    out: list[str] = []
    for r in sorted((r for r in records if r.ord is not None), key=lambda r: r.ord):  # type: ignore[arg-type, return-value]
        if r.inserts:
            assert r.value is not None
            level_of[r.value] = r.priority or 0
            levels.setdefault(r.priority or 0, deque()).append(r.value)
        elif r.op == PEEK:
            head = next((q[0] for _, q in sorted(levels.items()) if q), None)
            if head != r.value:
                held = "nothing" if head is None else repr(head)
                out.append(f"certificate replay: {r.describe()} saw {r.value!r}, but {held} "
                           "was at the front")  # fmt: skip
        elif r.value in level_of:
            q = levels[level_of.pop(r.value)]
            if r.value in q:
                q.remove(r.value)
    return out
