"""Leadership back home (``--failover``; docs/replication.md §5.5): a stand-in hands its
process back to the process's own daemon once that daemon is back and caught up, so
that each daemon leads its own process again and the load is spread.

A home that comes back after a stand-in took its process over is a backup
(runtime/failover.py): its host may have stepped inputs the stand-in overwrote, and its
host does not follow the log the stand-in writes.  So it cannot just be elected: its
host must first be rebuilt from its log, and the log must not move meanwhile.

1. The stand-in's group, at each tick (:func:`hand_back_if_due`), looks at the home's
   replica: a voter, not taken for lost, whose log has been within
   ``HOME_LAG_ENTRIES_MAX`` entries of the leader's for ``HOME_CAUGHT_UP_TICKS`` ticks
   in a row (3 s).  It then hands leadership over to it (``TransferLeader``, thesis
   §3.10): it takes no proposal, brings the home's log up to its own, and sends it
   ``TimeoutNow``.  Its inputs wait meanwhile (``ProcessGroup.leading``), for up to
   ``HANDOVER_TICKS`` (30 s), the time the home has to come back; then it serves on.
2. The backup home, told ``TimeoutNow`` by its leader, restarts (:func:`come_home`):
   its daemon stops and starts again from its data directory (the ``skueued`` command
   executes itself anew, same arguments), which replays the log into a new host: the
   state of its whole log, the leader's, since the leader appends nothing meanwhile.
3. The restarted home stands for election as at any start; the stand-in's followers
   ignore it (they hear from their leader); it follows the stand-in without becoming a
   backup, as long as its log stays what it replayed (``ProcessGroup.replayed``).  The
   stand-in, still handing over, sees its log whole and sends ``TimeoutNow`` again; the
   home stands at once, with the leader's leave, and wins.  The stand-in hears the new
   term and stops (runtime/stand_in.py); the home steps ``TookOver`` and announces
   where it serves, and the members' links and the clients come back to it.

If the home is not back in time, the stand-in takes proposals again, the home's log
moves past what it replayed, and it is a backup again, until the next hand-over.  A
daemon that cannot start itself again (one run inside another program,
``skueue.local_cluster``) stays a backup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skueue.replication.inputs import TransferLeader
from skueue.runtime.state import DaemonContext, log

if TYPE_CHECKING:
    from skueue.runtime.replicas import DaemonReplicas

# The home's log within this many entries of the stand-in's, for this many ticks in a
# row (each a heartbeat interval), before the stand-in hands the process back.
HOME_LAG_ENTRIES_MAX = 64
HOME_CAUGHT_UP_TICKS = 10
# How long the stand-in waits for the home to restart and take over (ticks), its inputs
# waiting, before it serves on.
HANDOVER_TICKS = 100


def hand_back_if_due(replicas: DaemonReplicas) -> None:
    """At a tick of a stand-in's group (module docstring, step 1)."""
    group, home = replicas.group, replicas.own
    node = group.node
    progress = node.progress.get(home)
    if (
        not group.leading
        or progress is None
        or not replicas.reaches(home)
        or home not in node.config.voters
        or home in replicas.lost
        or node.last_index - progress.match > HOME_LAG_ENTRIES_MAX
    ):
        replicas.home_caught_up = 0
        return
    replicas.home_caught_up += 1
    if replicas.home_caught_up >= HOME_CAUGHT_UP_TICKS:
        replicas.home_caught_up = 0
        log.info("the process's home is back and caught up: handing the process back",
                 process=home, term=node.term)  # fmt: skip
        group.step(TransferLeader(home))


def come_home(ctx: DaemonContext) -> None:
    """A backup's leader hands its process back (module docstring, step 2)."""
    if ctx.homecoming.is_set():
        return
    log.warning("the stand-in hands this daemon's process back: restarting from the data "
                "directory, to serve it again", process=ctx.process_id)  # fmt: skip
    ctx.homecoming.set()
