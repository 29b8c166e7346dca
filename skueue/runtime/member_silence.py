"""Which members have been silent for ``member_lost_after_s``: lost for good, as if
``skueue remove-member`` had said so (docs/replication.md §5.2, runtime/re_replication.py).

Silence, not a broken connection, is what counts.  A host that hangs, is paused, or sits
behind a partition keeps its TCP connections open for as long as the kernel's
retransmissions last (a quarter of an hour on Linux): the daemon channel to it looks up
while nothing comes back.  So each daemon with failover tells every member it is alive
on its channel (``["alive"]``, every few seconds, runtime/replicas.py), and any frame a
member's channel brings counts as hearing from it (runtime/incoming.py).

Two guards keep a daemon from taking live members for lost:

- **Its own stall is nobody's silence.**  A daemon that was paused, or whose machine
  was suspended, hears nothing while it is stopped; a gap of ``STALL_S`` or more between
  two looks starts every member's silence again from now.
- **A minority decides nothing.**  A daemon cut off from most of the cluster hears from
  few members: it takes none for lost unless it heard from a majority of the members
  (itself included) within ``member_lost_after_s``.  Otherwise the cut-off daemon would
  write every other member into its ``meta.json`` as lost, and act on it once it leads
  again.
"""

from __future__ import annotations

from collections.abc import Iterable

# A gap between two looks (they come at every replication tick, 0.3 s apart) this long
# means this daemon did not run meanwhile: nothing it heard, or did not, counts.
STALL_S = 5.0


class Hearing:
    """When this daemon last heard from each member on its daemon channel."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.looked_at: float | None = None  # (the first look starts every silence)

    def heard(self, member: str, now: float) -> None:
        self.last[member] = now

    def silent(self, members: Iterable[str], now: float, after: float) -> list[str]:
        """Of ``members`` (the others: not this daemon), those not heard from for
        ``after`` seconds, counted from when this daemon first looked for them; none
        while this daemon heard from too few members to judge (module docstring)."""
        members = list(members)
        if self.looked_at is None or now - self.looked_at >= STALL_S:
            for member in members:
                self.last[member] = now
        self.looked_at = now
        quiet = []
        for member in members:
            last = self.last.setdefault(member, now)
            if now - last >= after:
                quiet.append(member)
        heard = len(members) - len(quiet) + 1  # (this daemon hears itself)
        if heard <= (len(members) + 1) // 2:
            return []
        return quiet
