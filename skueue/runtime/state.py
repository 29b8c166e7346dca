"""What the daemon's parts share: the channels, the connections, the links.

The daemon is composed, not inherited: the owner (``owner.py``), the incoming
connections (``incoming.py``), the member removal (``member_removal.py``) and the
start-up (``startup.py``) each hold this context and use what they need of it.  Every
shared field is declared, and initialised, here; the host and the log belong to the
owner alone.
"""

from __future__ import annotations

import itertools
from typing import Any

import structlog
import trio

from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.runtime.config import DaemonConfig
from skueue.runtime.inbox import InboxItem
from skueue.runtime.network.daemon_channel import DaemonChannels
from skueue.runtime.network.link_receiver import Inbound
from skueue.runtime.network.peers import PeerLinks
from skueue.runtime.network.reactor import Reactor
from skueue.runtime.network.sessions import ClientSessions
from skueue.runtime.operations.tallies import Tallies

log = structlog.get_logger("skueued")


class DaemonContext:
    def __init__(self, config: DaemonConfig, welcome: Any) -> None:
        """``welcome()``: what a client is told when it connects."""
        self.config = config
        self.limits = config.limits
        self.inbox_send, self.inbox = trio.open_memory_channel[InboxItem](
            self.limits.inbox_items_max
        )
        # The owner's readiness loop: the plaintext connections it reads itself; a task
        # that puts an item in the inbox wakes it (runtime/network/reactor.py).
        self.reactor = Reactor()
        self.sessions = ClientSessions(
            self.limits,
            self.inbox_send,
            self.reactor,
            welcome,
            config.client_tokens,
            client_certs=config.tls is not None and config.tls.client_issuers is not None,
            tls=config.tls is not None,
        )
        self.ready = trio.Event()  # the owner runs: clients may be served
        self.address: Address = config.listen
        self.process_id = config.process_id or ""
        self.nursery: trio.Nursery | None = None
        # The member directory (the host's from when the host exists; read-only here)
        # and the links to the other members.
        self.directory: Directory | None = None
        self.links: PeerLinks | None = None
        self.channels: DaemonChannels | None = None  # to the members (daemon_channel.py)
        # The newest incoming daemon channel of each member, and how to end it.
        self.channel_sessions: dict[str, trio.CancelScope] = {}
        self.members_known = False  # the host exists: it knows this cluster's members
        # The newest incoming session of each peer, and how to end it (a bad frame).
        self.peer_sessions: dict[str, tuple[int, trio.CancelScope]] = {}
        # What this daemon took from each peer's link, across its connections.
        self.inbound: dict[str, Inbound] = {}
        self.session_numbers = itertools.count(1)
        # With failover, once another replica leads this daemon's process: why clients
        # and links are refused here (runtime/failover.py).  None: it serves it.
        self.backup: str | None = None
        # With failover: this daemon's process is handed back to it, and the daemon
        # starts again from its data directory (runtime/homecoming.py), where it can
        # (``can_restart``: run by the skueued command).
        self.homecoming = trio.Event()
        self.can_restart = False
        # Set, with the reason, once this daemon must stop for good: its host was taken
        # for lost while it was away (runtime/failover.py).  Daemon.run raises it.
        self.refused_for_good: str | None = None
        self.refused = trio.Event()
        self.tallies = Tallies()  # what the metrics count (runtime/operations/tallies.py)

    async def to_owner(self, item: InboxItem) -> None:
        """Put ``item`` in the owner's inbox (waiting while it is full) and wake it."""
        await self.inbox_send.send(item)
        self.reactor.wake()

    def to_owner_nowait(self, item: InboxItem) -> None:
        """:meth:`to_owner` where there is room for sure (the inbox is large)."""
        self.inbox_send.send_nowait(item)
        self.reactor.wake()

    def drop_peer_session(self, peer: str) -> None:
        session = self.peer_sessions.get(peer)
        if session is not None:
            session[1].cancel()
        inbound = self.inbound.get(peer)
        if inbound is not None and inbound.reader is not None:
            inbound.reader.end(None)  # the owner reads it no more, from now

    def drop_channel_session(self, peer: str) -> None:
        session = self.channel_sessions.get(peer)
        if session is not None:
            session.cancel()

    def why_no_answer(self) -> str:
        """What the daemon knows of why the cluster is not answering (for timeouts)."""
        assert self.links is not None and self.directory is not None
        down = self.links.down()
        if not down:
            return "no member is known to be down (overloaded, or in an update phase?)"
        directory, restarted = self.directory, self.links.restarted

        def named(process: str) -> str:
            address = str(directory.address(process))
            return process if address == process else f"{process} at {address}"

        return "members unreachable: " + ", ".join(
            f"{named(p)} ({'restarted without its state' if p in restarted else 'down'}"
            f" for {s:.0f} s)"
            for p, s in down.items()
        )


def not_a_member_message(peer: str, seed: Address) -> str:
    """What a daemon that took us for a member of its static cluster is told."""
    return (
        f"{peer} is not a member of this cluster (a static cluster's members are the "
        f"daemons it first started with); to add a daemon to a running cluster, start it "
        f"with --join {seed} instead of --peers"
    )


def removed_message(peer: str) -> str:
    """What a member removed by ``skueue remove-member`` is told if it comes back."""
    return (
        f"{peer} was removed from this cluster (skueue remove-member) and cannot come "
        "back under that id: start it with another --id, an empty data directory and "
        "--join"
    )
