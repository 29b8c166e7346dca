"""The terms of a log's entries, as runs: one ``(first index, term)`` pair each time the
term changes along the log.  A leader appends in its own term, so a log holds a run per
term it saw, not a term per entry: a group of one, which leads in one term a life, keeps
one run however long its log grows."""

from __future__ import annotations

from bisect import bisect_left, bisect_right


class TermRuns:
    """The terms of the indexes ``base + 1`` through ``last``."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.last = base
        self.starts: list[int] = []
        self.terms: list[int] = []

    def append(self, term: int) -> None:
        self.last += 1
        if not self.terms or self.terms[-1] != term:
            self.starts.append(self.last)
            self.terms.append(term)

    def at(self, index: int) -> int:
        """The term of ``index`` (``base < index <= last``)."""
        assert self.base < index <= self.last, (index, self.base, self.last)
        return self.terms[bisect_right(self.starts, index) - 1]

    def run_start(self, index: int) -> int:
        """The first index of the run that holds ``index``."""
        return self.starts[bisect_right(self.starts, index) - 1]

    def last_term(self) -> int | None:
        return self.terms[-1] if self.terms else None

    def truncate_from(self, index: int) -> None:
        """Forget ``index`` and every index after it."""
        cut = bisect_left(self.starts, index)
        del self.starts[cut:], self.terms[cut:]
        self.last = min(self.last, index - 1)

    def drop_through(self, index: int) -> None:
        """Forget every index through ``index``: the runs start after it."""
        if index >= self.last:
            self.starts, self.terms = [], []
            self.base = self.last = index
            return
        keep = bisect_right(self.starts, index + 1) - 1  # the run holding index + 1
        del self.starts[:keep], self.terms[:keep]
        self.starts[0] = index + 1
        self.base = index
