"""What a member does with failover's news (``--failover``; docs/replication.md §5.3):
where a process is served now, and its own process led by another replica.

- ``["leader", P, term, address]`` on the daemon channel: P's group elected a leader in
  ``term`` that serves P at ``address`` (runtime/stand_in.py); this daemon's link to P
  goes there from its next connection (:meth:`PeerLinks.relocate`).
- ``["host-lost", [ids]]``: an operator declared those hosts lost for good (``skueue
  remove-member``, runtime/member_removal.py); the groups this daemon and its stand-ins
  lead replace them (runtime/re_replication.py).
- A home daemon whose own group elects another replica, or that stops leading after it
  led, is a **backup** of its process for the rest of this life
  (:meth:`ProcessGroup.role_changed`): its host may hold inputs that the new leader
  overwrote, so it never leads with it again.  Its links close (the process's frames go
  from the stand-in now: two links of one process would end each other's connections at
  every peer), nothing it held after its commit goes out, and its copy of the log goes
  on counting toward the commit.  Once it has caught up, the stand-in hands the process
  back, and it restarts to serve it again (runtime/homecoming.py).
- A home told ``["dropped", P]`` for its own process P while it does not lead it: the
  others took its host for lost for good while it was away (``skueue remove-member``, or
  silent for ``--member-lost-after``) and its group replaced it.  Nothing can hand the
  process back to it: the daemon stops, saying how to bring the host back as a new
  member (:func:`lost_while_away`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skueue.core.errors import RemoteProtocolError
from skueue.host.address import AddressError, parse_address
from skueue.host.replies import MOVED, UNAVAILABLE
from skueue.runtime.member_removal import named_members
from skueue.runtime.state import DaemonContext, log

if TYPE_CHECKING:
    from skueue.runtime.owner import Owner


def took_over(owner: Owner, peer: str, frame: list[Any]) -> None:
    """A ``leader`` frame from ``peer``'s daemon channel."""
    _, process, term, at = frame
    try:
        if type(process) is not str or type(term) is not int or term < 0:
            raise RemoteProtocolError(f"leader: bad process or term {frame!r:.100}")
        if not isinstance(at, str):
            raise RemoteProtocolError(f"leader: bad address {at!r:.60}")
        address = parse_address(at)
    except (RemoteProtocolError, AddressError) as e:
        log.warning("bad leader frame; closing the member's channel", peer=peer, error=str(e))
        owner.ctx.drop_channel_session(peer)
        return
    links = owner.ctx.links
    if links is not None:  # (its own too: its clients are told where it is served)
        links.relocate(process, term, address)


def host_lost(owner: Owner, peer: str, frame: list[Any]) -> None:
    """A ``host-lost`` frame from ``peer``'s daemon channel."""
    hosts = frame[1]
    if not named_members(hosts):
        log.warning("bad host-lost frame; closing the member's channel", peer=peer)
        owner.ctx.drop_channel_session(peer)
        return
    if owner.replicas is not None:
        owner.replicas.host_lost(hosts)


def served_at(ctx: DaemonContext, process: str) -> tuple[str, str]:
    """What a client whose session belongs to ``process``, which this daemon does not
    serve, is told: the address where it is served now (``moved``), or, where no leader
    said so, to try again later."""
    led = None if ctx.links is None else ctx.links.led_at.get(process)
    if led is None:
        return f"no member is known to serve {process} now", UNAVAILABLE
    return str(led[1]), MOVED


def become_backup(owner: Owner) -> None:
    """The home's group follows another replica, or stopped leading after it led: its
    links close for good (module docstring)."""
    ctx = owner.ctx
    assert ctx.links is not None
    owner.held.freeze()
    owner.links_wait_for = None  # they never start, if they had not
    for link in ctx.links.senders.values():
        link.close()
    for session in ctx.sessions.clients.values():
        # Their requests are never answered here: they reconnect, are told where the
        # process is served now, and send them there again.
        if session.scope is not None:
            session.scope.cancel()
    ctx.backup = (f"{ctx.process_id} keeps a copy of its process, which another member "
                  "serves now (failover): connect to another member")  # fmt: skip
    log.warning("this daemon's process is led by another replica now; this daemon keeps a "
                "copy of its log and serves its other copies, not the process (until "
                "the stand-in hands it back)",
                process=ctx.process_id)  # fmt: skip


def lost_while_away(ctx: DaemonContext, told_by: str) -> None:
    """This daemon's own group replaced it (module docstring): it stops for good."""
    if ctx.refused.is_set():
        return
    ctx.refused_for_good = (
        f"{ctx.process_id} was taken for lost for good while it was away (skueue "
        "remove-member, or nothing heard from it for --member-lost-after): another member "
        "serves its process and keeps its copies now; to bring this host back, start it "
        "as a new member, with an empty data directory, --join and another --id"
    )
    log.error("this daemon's group replaced it while it was away; stopping",
              process=ctx.process_id, told_by=told_by)  # fmt: skip
    ctx.refused.set()
