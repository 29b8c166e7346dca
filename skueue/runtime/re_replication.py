"""Re-replication and growth (docs/replication.md §5.7): a group that lost a replica's
host for good gets a new replica on a survivor, and a group with fewer voters than
``--replicas`` (a joiner's, which starts alone) gets more as members can take them, one
single-server change at a time (thesis §4.1–4.3).

A host is *lost* once an operator said so (``skueue remove-member`` of a member whose
process its copies serve: runtime/member_removal.py); every member hears it on the
daemon channels (``["host-lost", [ids]]``).  Each group's leader, the home daemon or a
stand-in (runtime/stand_in.py), then moves its configuration, at its ticks, by
:func:`next_change`:

1. ``AddLearner(R)``: R is the first host after the group's process in ring order
   that is neither lost nor a replica already, and whose daemon channel is up.  R has
   no copy of the group yet: its daemon opens one when the leader's first append or
   snapshot reaches it (runtime/replicas.py), and it catches up from the leader's
   snapshot (runtime/snapshot_transfer.py) and log; it neither votes nor counts;
2. ``Promote(R)`` once it holds the leader's commit (the Raft module refuses it before);
3. ``Remove(L)``: the lost host leaves; three voters again.

Adding before removing keeps a majority of live voters at every step: with L lost, the
group of three goes on with two, gains a third, and only then forgets L.  The leader
proposes a change only once the last one is committed and one of its own term is (the
Raft module refuses otherwise, and it asks again at its next tick).  Where no host is
left to add, the lost host is removed all the same: a group of two live voters commits
with both, as it did with the lost one still listed.

**Growth.** A group with fewer live voters than ``--replicas`` and nothing lost takes
steps 1 and 2 alone, with the same R: a joiner's group (it starts with its own replica
alone, runtime/startup.py) grows as its daemon meets the members, its seed first; a
group that lost a host when no other was left to take its place grows again when a
member joins.

**Placement after joins.** A group its home leads, with nothing lost and no learner,
moves toward §5.7's placement over the live members (its home and the next
``--replicas − 1`` in ring order), one copy at a time: ``AddLearner(R)`` for the first
host of the placement it lacks, ``Promote(R)``, then ``Remove(V)`` of a voter outside
it.  So a joiner takes its share of copies: the groups of the members just before it
move one copy each onto it.  The home then tells V, once the removal is committed, that
its copy is dropped (``["dropped", P]`` on the daemon channel), and again whenever V
speaks for the group: V deletes its copy (runtime/replicas.py).  Only once committed:
a copy deleted while it still counted toward the commit would be a voter that forgot.

**A new copy starts from a snapshot.** The daemon that opens a copy for a group it did
not start with knows neither the group's first configuration nor how its process was
made (a joiner's, or any group on a joiner), so the leader sends the copy its snapshot
before any entry: a leader that never took one takes one first (``want_snapshot``),
and adds the learner at a later tick.  The learner's empty log refuses the leader's
first append; the leader goes back to the log's start, which is before its snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from skueue.replication.config import AddLearner, Config, ConfigChange, HostId, Promote, Remove
from skueue.runtime.replica_driver import ReplicaDriver
from skueue.runtime.state import log


def next_change(
    process: str,
    config: Config,
    lost: Collection[HostId],
    ring: Sequence[HostId],
    replicas: int,
    up: Callable[[HostId], bool],
) -> ConfigChange | None:
    """The next change that replaces ``lost`` hosts in ``process``'s group or grows it
    to ``replicas`` voters (module docstring), or None: nothing to do, or nothing until a
    host is up.  ``ring``: every member in ring order; ``up``: whether a host can be
    reached now."""
    for learner in config.learners:
        if learner in lost:
            return Remove(learner)
    if config.learners:
        return Promote(config.learners[0])
    live = [v for v in config.voters if v not in lost]
    if len(live) < replicas:
        at = ring.index(process) if process in ring else 0
        for j in range(1, len(ring) + 1):
            host = ring[(at + j) % len(ring)]
            if host not in lost and host not in config.members and up(host):
                return AddLearner(host)
    return next((Remove(v) for v in config.voters if v in lost), None)


def toward_placement(
    process: str,
    config: Config,
    lost: Collection[HostId],
    ring: Sequence[HostId],
    replicas: int,
    up: Callable[[HostId], bool],
) -> ConfigChange | None:
    """The next change that moves a group its home leads toward its placement over the
    live members (module docstring), or None: it is there, or what it lacks is down."""
    live = [h for h in ring if h not in lost]
    if config.learners or process not in live or any(h in lost for h in config.members):
        return None  # (next_change's to do)
    at = live.index(process)  # (ring order: skueue/host/placement.py's voters_of)
    placed = [live[(at + j) % len(live)] for j in range(min(replicas, len(live)))]
    outside = [v for v in config.voters if v not in placed and v != process]
    if outside and len(config.voters) > replicas:
        return Remove(outside[0])
    missing = [h for h in placed if h not in config.voters]
    if missing and outside and up(missing[0]):
        return AddLearner(missing[0])
    return None


def reconfigure(
    group: ReplicaDriver,
    lost: Collection[HostId],
    ring: Sequence[HostId],
    replicas: int,
    up: Callable[[HostId], bool],
    want_snapshot: Callable[[], None] | None,
) -> None:
    """At a tick of a group this daemon leads: propose the next change, if any (a
    learner only once the leader holds a snapshot to start its copy from)."""
    node = group.node
    own = node.host
    lost = [h for h in lost if h != own]
    config = node.config
    change = next_change(group.group, config, lost, ring, replicas, up)
    if change is None and own == group.group:  # (a stand-in's group waits for its home)
        change = toward_placement(group.group, config, lost, ring, replicas, up)
    if change is None:
        return
    why = ("a host lost" if any(h in lost for h in config.members)
           else "growth" if len(config.voters) < replicas else "placement")  # fmt: skip
    if isinstance(change, AddLearner) and node.snapshot_index == 0:
        if want_snapshot is not None:
            want_snapshot()
        return
    refused = group.change_config(change)
    if refused is None:
        log.info("the group's replicas change", group=group.group, why=why,
                 change=type(change).__name__, host=change.host)  # fmt: skip
