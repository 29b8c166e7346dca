"""Whether a daemon is ready to serve: ``/readyz``, ``skueue health`` and ``skueue stats``.

Ready means: start-up is over (peers reached, log replayed), this member is in the ring
and not leaving, every peer it knows is reachable, and it is not stuck in an update phase
(in one phase for ``update_phase_stall_s`` or more).  Anything else is "not ready" with a
short reason, the first that applies in that order.

A phase is told from the next by how many phases the process's nodes have entered
(:attr:`~skueue.core.process.NodeStats.phases_entered`); its age is measured from the
first time a readiness check saw it, so a phase is found stalled at most one probe
interval late.  (Phases take milliseconds; a stalled one waits for a member that is
down, which the peer check reports first.)
"""

from __future__ import annotations

import attrs

from skueue.core.stats import ProcessStats


@attrs.frozen
class Readiness:
    ready: bool
    reason: str  # "ready", or why not (one line)


class PhaseWatch:
    """When the update phase this process is in was first seen."""

    def __init__(self) -> None:
        self.phase: tuple[int, ...] | None = None
        self.since = 0.0

    def age(self, stats: ProcessStats, now: float) -> tuple[float, int]:
        """Seconds the current phase has lasted so far, and its stage (0: none)."""
        stage = max((n.phase_stage for n in stats.nodes.values()), default=0)
        if not stage:
            self.phase = None
            return 0.0, 0
        phase = tuple(n.phases_entered for n in stats.nodes.values())
        if phase != self.phase:
            self.phase, self.since = phase, now
        return now - self.since, stage


STAGES = {1: "quiet", 2: "joins", 3: "leaves"}


def readiness(
    stats: ProcessStats | None,
    down: dict[str, float],
    watch: PhaseWatch,
    stall_s: float,
    now: float,
) -> Readiness:
    """``stats`` None: the daemon is still starting; ``down``: peers unreachable, with
    the seconds since."""
    if stats is None:
        return Readiness(False, "starting: waiting for its peers or replaying its log")
    if stats.departed:
        return Readiness(False, "left the cluster")
    if stats.leaving:
        return Readiness(False, "leaving the cluster")
    if not stats.joined:
        return Readiness(False, "joining: not in the ring yet")
    if down:
        peers = ", ".join(f"{p} (down {s:.0f} s)" for p, s in sorted(down.items()))
        return Readiness(False, f"peers unreachable: {peers}")
    age, stage = watch.age(stats, now)
    if stage and age >= stall_s:
        return Readiness(
            False,
            f"stalled in an update phase: stage {STAGES.get(stage, stage)} for {age:.0f} s",
        )
    return Readiness(True, "ready")
