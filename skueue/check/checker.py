"""Consistency checkers for queue and stack histories: the public entry point.

Theory of operation
-------------------
A checker reads a history (a list of :class:`~skueue.check.history.Record`) and
nothing else: never protocol state, never logs.  It decides one of two
models from SPEC §1:

- ``"sc"``: sequential consistency (paper, Definition 1): some total order
  respects each process's program order and the sequential queue (FIFO) or
  stack (LIFO) semantics, with unique elements.  In a finite history
  elements may remain at the end unless the caller says the run ``drained``.
- ``"linearizable"``: the same, and the order also respects real time
  (``a.response < b.invoke`` puts ``a`` first).

Three methods trade cost for power:

- ``exact`` (:mod:`skueue.check.exact`): memoized search; decides every
  history, exponential in the worst case, limited to small histories.
- ``certificate`` (:mod:`skueue.check.certificate`): verifies the anchor's
  ``ord`` as a witness order in ``O(n log n)``.  A pass proves consistency; a
  failure proves only that the certificate is wrong.
- ``patterns`` (:mod:`skueue.check.patterns`): sound, incomplete
  ``O(n log n)`` rules; a failure proves inconsistency, a pass proves nothing.

``check(method="auto")`` picks: the certificate when every record has an
``ord`` (falling back to the exact search to decide if it fails on a small
history), else the exact search for small histories, else patterns.  The
verdict's ``method`` always names the method that decided.  A failed certificate
on a history too large to search decides nothing: the patterns may still prove a
violation, and if they find none the verdict is *unproven* (``decided`` False), not a
violation: the anchor's order was no witness, but another order may be one.

The engines return ``None`` or a reason string; this module wraps them in
:class:`Verdict`, so the engines need not import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from skueue.check.certificate import find_violation_certificate
from skueue.check.exact import (
    EXACT_OPS_MAX,
    EXACT_STATES_MAX,
    ExactLimitError,
    find_violation_exact,
)
from skueue.check.history import Record, structure_of, validate_history
from skueue.check.patterns import find_violation_patterns

__all__ = [
    "EXACT_OPS_MAX",
    "EXACT_STATES_MAX",
    "ExactLimitError",
    "Verdict",
    "check",
    "check_certificate",
    "check_exact",
    "check_patterns",
    "unproven",
]

MODELS: Final = ("sc", "linearizable")
METHODS: Final = ("auto", "exact", "certificate", "patterns")
# A pass by patterns is no proof; exact search and the certificate are.
METHOD_STRENGTH: Final = {"patterns": 0, "certificate": 1, "exact": 1}


@attrs.frozen
class Verdict:
    """Outcome of one check."""

    ok: bool
    model: str
    """``"sc"`` or ``"linearizable"``."""
    method: str
    """``"exact"``, ``"certificate"`` or ``"patterns"``: the method that decided."""
    structure: str
    """``"queue"`` or ``"stack"``."""
    reason: str | None
    """First violation found, naming the records involved; None if ok.  When not
    ``decided``: why, and what would decide it."""
    decided: bool = True
    """False when neither consistency nor a violation was shown (``ok`` is then False:
    consistency was not shown): a failed certificate on a history too large for the
    exact search, where no violation pattern matched.  See :func:`unproven`."""

    def describe(self) -> str:
        head = f"{self.model}/{self.method}/{self.structure}"
        if not self.decided:
            return f"{head}: UNPROVEN: {self.reason}"
        if not self.ok:
            return f"{head}: VIOLATION: {self.reason}"
        if self.method == "patterns":
            return f"{head}: no violation found (patterns are incomplete: not a proof)"
        return f"{head}: ok"


def _prepare(
    records: Iterable[Record], model: str, structure: str | None
) -> tuple[list[Record], str, bool]:
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    recs = list(records)
    validate_history(recs)
    found = structure_of(recs)
    if structure is None:
        structure = found
    elif structure not in ("queue", "stack"):
        raise ValueError(f"structure must be 'queue' or 'stack', got {structure!r}")
    elif recs and structure != found:
        raise ValueError(f"structure {structure!r} given, but the history is a {found}")
    return recs, structure, model == "linearizable"


def _verdict(model: str, method: str, structure: str, reason: str | None) -> Verdict:
    ok = reason is None
    return Verdict(ok=ok, model=model, method=method, structure=structure, reason=reason)


def unproven(model: str, structure: str, certificate_reason: str, limit: str) -> Verdict:
    """The verdict when the certificate failed, the history is beyond the exact search
    (``limit`` says how) and no violation pattern matched: a certificate that fails
    proves only that the anchor's order is no witness, not that none exists."""
    return Verdict(
        ok=False, model=model, method="certificate", structure=structure, decided=False,
        reason=f"the ord certificate fails ({certificate_reason}), which proves only that "
        f"the anchor's order is no witness; no violation pattern matched; the exact search "
        f"would decide it, but the history is too large for it ({limit})",
    )


def check_exact(
    records: Iterable[Record],
    *,
    model: str,
    structure: str | None = None,
    drained: bool = False,
    ops_max: int = EXACT_OPS_MAX,
    states_max: int = EXACT_STATES_MAX,
) -> Verdict:
    """Decide by search.  Raises :class:`ExactLimitError` beyond ``ops_max``/``states_max``."""
    recs, structure, realtime = _prepare(records, model, structure)
    return _exact(recs, model, structure, realtime, drained, ops_max, states_max)


def _exact(
    recs: Sequence[Record],
    model: str,
    structure: str,
    realtime: bool,
    drained: bool,
    ops_max: int,
    states_max: int,
) -> Verdict:
    reason = find_violation_exact(
        recs,
        structure=structure,
        realtime=realtime,
        drained=drained,
        ops_max=ops_max,
        states_max=states_max,
    )
    return _verdict(model, "exact", structure, reason)


def check_certificate(
    records: Iterable[Record], *, model: str, structure: str | None = None, drained: bool = False
) -> Verdict:
    """Verify the records' ``ord`` as a witness order."""
    recs, structure, realtime = _prepare(records, model, structure)
    reason = find_violation_certificate(
        recs, structure=structure, realtime=realtime, drained=drained
    )
    return _verdict(model, "certificate", structure, reason)


def check_patterns(
    records: Iterable[Record],
    *,
    model: str = "sc",
    structure: str | None = None,
    drained: bool = False,
) -> Verdict:
    """Look for definite violations only; ``ok`` here is not a proof."""
    recs, structure, realtime = _prepare(records, model, structure)
    reason = find_violation_patterns(recs, structure=structure, realtime=realtime, drained=drained)
    return _verdict(model, "patterns", structure, reason)


def check(
    records: Iterable[Record],
    *,
    model: str = "linearizable",
    method: str = "auto",
    structure: str | None = None,
    drained: bool = False,
    exact_ops_max: int = EXACT_OPS_MAX,
) -> Verdict:
    """Check a history; ``method="auto"`` picks the strongest affordable method.

    A history of several named queues is checked queue by queue: each queue is its own
    object with its own ``ord``.  Linearizability is local (Herlihy and Wing, Theorem 1):
    the whole history is linearizable exactly when every queue's is.  Sequential
    consistency is not local, so for ``model="sc"`` this is each queue's SC only."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    records = list(records)
    queues = sorted({r.queue or "" for r in records})
    if len(queues) > 1:
        verdicts = []
        for queue in queues:
            one = [r for r in records if (r.queue or "") == queue]
            verdict = check(one, model=model, method=method, structure=structure,
                            drained=drained, exact_ops_max=exact_ops_max)  # fmt: skip
            name = queue or "default"
            verdicts.append(attrs.evolve(verdict, reason=f"queue {name!r}: {verdict.reason}")
                            if not verdict.ok else verdict)  # fmt: skip
        # A proven violation of one queue settles it; an unproven queue leaves it open.
        failed = [v for v in verdicts if not v.ok]
        if failed:
            return min(failed, key=lambda v: not v.decided)
        weakest = min(verdicts, key=lambda v: METHOD_STRENGTH[v.method])
        kinds = "+".join(sorted({v.structure for v in verdicts}))
        return _verdict(model, weakest.method, kinds, None)
    recs, structure, realtime = _prepare(records, model, structure)
    if method == "exact":
        return _exact(recs, model, structure, realtime, drained, exact_ops_max, EXACT_STATES_MAX)
    if method == "certificate":
        reason = find_violation_certificate(
            recs, structure=structure, realtime=realtime, drained=drained
        )
        return _verdict(model, "certificate", structure, reason)
    if method == "patterns":
        reason = find_violation_patterns(
            recs, structure=structure, realtime=realtime, drained=drained
        )
        return _verdict(model, "patterns", structure, reason)

    cert_reason: str | None = None
    if recs and all(r.ord is not None for r in recs):
        cert_reason = find_violation_certificate(
            recs, structure=structure, realtime=realtime, drained=drained
        )
        if cert_reason is None:
            return _verdict(model, "certificate", structure, None)
    limit = f"{len(recs)} ops > {exact_ops_max}"
    if len(recs) <= exact_ops_max:
        try:
            return _exact(
                recs, model, structure, realtime, drained, exact_ops_max, EXACT_STATES_MAX
            )
        except ExactLimitError:
            limit = f"over {EXACT_STATES_MAX} states"
    reason = find_violation_patterns(recs, structure=structure, realtime=realtime, drained=drained)
    if cert_reason is not None and reason is None:
        return unproven(model, structure, cert_reason, limit)
    return _verdict(model, "patterns", structure, reason)
