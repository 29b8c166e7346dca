"""A stand-in: this daemon serves another member's process, because its copy of that
process's log was elected to lead it (``--failover``; docs/replication.md §5.3).

A follower slot (runtime/follower_slot.py) stands for election once its leader was
silent for an election timeout (3 to 6 s), if it holds a state and knows the process's
incarnation (its nonce: the peers take the stand-in for the same member).  Raft's
election makes sure the winner's log holds every committed entry.  The switch:

1. the slot steps the entries of its log it has not applied yet (what it inherited of
   the last leader's tail: its new term's ``took_over`` entry commits them), on the
   state it applied so far (runtime/applied_state.py): the host, the last frame handled
   of each peer's link, the frames owed to each peer, numbered as the last leader's
   links numbered them;
2. that state becomes an owner's (runtime/owner.py), of a context of its own: its own
   inbox, client sessions and process links, which say hello as the process, with its
   nonce, from a listener of its own on this daemon's host (a port the system picks);
   its replication group is the slot's replica, which leads (its messages still go on
   this daemon's channels: the owner of this daemon hands the stand-in the ones for it);
3. the owner steps ``TookOver`` first, as a restarted daemon does; the links start once
   that is committed, and resend what the peers have not acknowledged (they skip what
   they have: the frames are the same, invariant I3);
4. the group's leader says where it serves, ``["leader", P, term, address]``, to every
   member on the daemon channels, at its election and every few seconds after
   (runtime/replicas.py); the members' links to P go there from their next connection
   (:meth:`PeerLinks.relocate`).  Clients of the lost member reconnect to another one.

A stand-in whose group stops leading (another replica was elected, or it heard from no
majority for an election timeout) stops: what it held after its commit then never goes
out (:attr:`ProcessGroup.releasable`), its listener and links close, and the slot opens
again from its disk (its snapshot, then the log as the new leader's commit reaches it),
as after a restart.  Its host may have stepped entries another leader overwrote, so it is
never used again.
"""

from __future__ import annotations

import dataclasses
import itertools
import socket
from collections.abc import Callable

import attrs
import trio

from skueue.host.address import Address
from skueue.host.replies import Welcome
from skueue.runtime.durability.input_log import InputLog
from skueue.runtime.follower_slot import FollowerSlot
from skueue.runtime.group import ProcessGroup
from skueue.runtime.homecoming import HANDOVER_TICKS
from skueue.runtime.inbox import ChannelFrame
from skueue.runtime.incoming import IncomingConnections
from skueue.runtime.network.link_receiver import Inbound
from skueue.runtime.network.peers import PeerLinks
from skueue.runtime.owner import Owner
from skueue.runtime.replicas import DaemonReplicas, open_slot
from skueue.runtime.snapshot_transfer import SnapshotShipper
from skueue.runtime.state import DaemonContext, log
from skueue.wire.client_hello import PROTOCOL_VERSION
from skueue.wire.client_protocol import limits_for_clients


class StandIn:
    def __init__(
        self, daemon: DaemonContext, home: DaemonReplicas, slot: FollowerSlot,
        ended: Callable[[str], None],
    ) -> None:  # fmt: skip
        """``daemon``: the context of the daemon that runs it, and ``home`` its replicas;
        ``slot``: the follower slot just elected; ``ended(process)``: called once it
        stopped, to open the slot again."""
        self.daemon = daemon
        self.home = home
        self.process = slot.group
        self.slot = slot
        self.ended = ended
        config = attrs.evolve(daemon.config, process_id=self.process, data_dir=None,
                              metrics=None, restore_from_copies=False)  # fmt: skip
        self.ctx = DaemonContext(config, self.welcome)
        self.owner: Owner | None = None
        self.listener = _listener(daemon.config.listen.host, daemon.config.stand_in_ports)
        # The peers reach it there (its announcements say so); its hellos name the
        # process's own address, which the members' directories keep: the daemon
        # channels still go to the member that lost the process (runtime/replicas.py).
        self.listening = Address(daemon.address.host, self.listener.socket.getsockname()[1])

    def welcome(self) -> Welcome:
        ctx = self.ctx
        return Welcome(self.process, ctx.config.structure.value, PROTOCOL_VERSION,
                       limits_for_clients(ctx.limits))  # fmt: skip

    def forward(self, item: ChannelFrame) -> None:
        """A replication frame for the process, from this daemon's channels.  Dropped
        while the stand-in starts or when its inbox is full: Raft takes the loss."""
        if self.owner is not None:
            try:
                self.ctx.inbox_send.send_nowait(item)
            except (trio.WouldBlock, trio.ClosedResourceError):
                return
            self.ctx.reactor.wake()

    async def run(self) -> None:
        """Serve the process until its group stops leading here."""
        ctx, slot, listener = self.ctx, self.slot, self.listener
        ctx.process_id = self.process
        try:
            async with trio.open_nursery() as nursery:
                ctx.nursery = nursery
                owner = self._owner(nursery)
                nursery.start_soon(trio.serve_listeners, IncomingConnections(ctx).on_connection,
                                   [listener])  # fmt: skip
                nursery.start_soon(owner.run)
                self.owner = owner
                log.info("stands in for a member: serves its process", process=self.process,
                         address=str(self.listening), term=slot.node.term)  # fmt: skip
                await self._lead_while_elected(owner)
                nursery.cancel_scope.cancel()
        finally:
            self.owner = None
            if self.daemon.links is not None and self.ctx.links in self.daemon.links.stand_ins:
                self.daemon.links.stand_ins.remove(self.ctx.links)
            ctx.reactor.close()
            slot.input_log.close()
            slot.store.close()
            self.ended(self.process)

    def _owner(self, nursery: trio.Nursery) -> Owner:
        """The owner of the state the slot applied, with the inherited tail stepped."""
        daemon, ctx, slot = self.daemon, self.ctx, self.slot
        state = slot.take_the_lead()
        host = state.host
        ctx.address = host.directory.addresses[self.process]
        assert daemon.links is not None and daemon.channels is not None
        links = PeerLinks(self.process, ctx.address, ctx.limits, nursery, host.directory,
                          ctx.config.cluster_keys, ctx.config.tls)  # fmt: skip
        links.replicas, links.failover = daemon.links.replicas, daemon.links.failover
        links.incarnations.update(daemon.links.incarnations)
        links.nonce = daemon.links.incarnations[self.process]
        links.senders = dict(state.outboxes)
        # It links to the processes other stand-ins serve where their leaders said.
        for process, (term, address) in daemon.links.led_at.items():
            if process != self.process:
                links.relocate(process, term, address)
        daemon.links.stand_ins.append(links)
        links.unaddressed = set(state.outboxes)
        ctx.links, ctx.channels = links, daemon.channels
        for peer, number in state.handled.items():
            inbound = ctx.inbound[peer] = Inbound()
            inbound.accepted = inbound.handled = inbound.acked = number
        ctx.sessions.client_ids = itertools.count(host.client_ids_max + 1)
        owner = Owner(ctx, host, slot.input_log, slot.store)
        group = owner.group = ProcessGroup.taking_over(slot)
        # It waits that long for the home it hands the process back to (homecoming.py).
        group.node.settings = dataclasses.replace(group.node.settings,
                                                  transfer_ticks=HANDOVER_TICKS)
        group.shipper = SnapshotShipper(self.process, slot.input_log, slot.store, ctx.limits,
                                        daemon.channels.send)  # fmt: skip
        replicas = owner.replicas = DaemonReplicas(self.process, group, {}, daemon.channels,
                                                   links, ctx.limits, trio.current_time())
        replicas.failover, replicas.listening = True, self.listening
        # It replaces lost hosts in its group, and grows it, as any leader
        # (runtime/re_replication.py).
        replicas.ring, replicas.lost = self.home.ring, self.home.lost
        replicas.remember_lost = self.home.remember_lost
        replicas.voters_per_group = self.home.voters_per_group
        replicas.want_snapshot = lambda: setattr(owner, "snapshot_wanted", True)
        owner.must_take_over = True
        owner.links_wait_for = group.node.last_index
        group.on_deposed = owner.held.freeze  # then it stops (_lead_while_elected)
        return owner

    async def _lead_while_elected(self, owner: Owner) -> None:
        group = owner.group
        assert group is not None
        interval = self.ctx.limits.heartbeat_interval_s
        while group.deposed_at is None and group.node.role == "leader":
            if owner.led.is_set() and not self.ctx.ready.is_set():
                self.ctx.ready.set()
                log.info("the stand-in serves", process=self.process, term=group.node.term)
            await trio.sleep(interval / 4)
        log.warning("the stand-in stops: its group elected another replica, or it heard "
                    "from no majority; the copy opens again from its disk",
                    process=self.process, term=group.node.term)  # fmt: skip


def _listener(host: str, ports: tuple[int, int] | None = None) -> trio.SocketListener:
    """A listener on ``host`` (bound here, at once): on the first free port of ``ports``
    (``--stand-in-ports``), else, or when none is free, on a port the system picks: an
    elected copy serves its process rather than none, and says where."""
    if ports is not None:
        for port in range(ports[0], ports[1] + 1):
            try:
                return _bound(host, port)
            except OSError:
                continue
        log.warning("no free port in --stand-in-ports; the stand-in listens on a port the "
                    "system picks", low=ports[0], high=ports[1])  # fmt: skip
    return _bound(host, 0)


def _bound(host: str, port: int) -> trio.SocketListener:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return trio.SocketListener(trio.socket.from_stdlib_socket(sock))


class StandIns:
    """The stand-ins a daemon runs: started when one of its slots is elected, and the
    slot opened again from its disk when the stand-in stops."""

    def __init__(
        self, ctx: DaemonContext, replicas: DaemonReplicas, input_log: InputLog,
        members: list[str],
    ) -> None:  # fmt: skip
        self.ctx = ctx
        self.replicas = replicas
        self.input_log = input_log  # the daemon's own: the slots live under it
        self.members = members
        self.running: dict[str, StandIn] = {}

    def elect(self, slot: FollowerSlot) -> None:
        """``slot`` was elected (in the owner's step): its process is served here from
        now, and this daemon's own link to it goes to the stand-in."""
        ctx = self.ctx
        assert ctx.nursery is not None and ctx.links is not None
        stand_in = StandIn(ctx, self.replicas, slot, self._ended)
        ctx.tallies.took_over += 1
        self.running[slot.group] = stand_in
        self.replicas.forward[slot.group] = lambda peer, frame: stand_in.forward(
            ChannelFrame(peer, frame))
        ctx.links.relocate(slot.group, slot.node.term, stand_in.listening)
        self.replicas.standing[slot.group] = str(stand_in.listening)
        ctx.nursery.start_soon(stand_in.run)

    def _ended(self, process: str) -> None:
        self.ctx.tallies.stand_ins_ended += 1
        self.running.pop(process, None)
        self.replicas.forward.pop(process, None)
        self.replicas.standing.pop(process, None)
        addresses = dict(self.ctx.directory.addresses) if self.ctx.directory else {}
        self.replicas.slots[process] = open_slot(self.ctx, self.input_log, process,
                                                 self.members, addresses, True)  # fmt: skip
