"""The state the daemon's parts share, and the small services each of them uses.

The daemon is one object split by job over a few modules (the owner loop, incoming
connections, membership waiters); each part is a class over this shared state, so that
every field is declared, and initialised, in one place.
"""

from __future__ import annotations

import itertools
from typing import Any

import structlog
import trio

from skueue.core.effects import Effect
from skueue.host.address import Address
from skueue.host.directory import Directory
from skueue.host.host import Host
from skueue.runtime.config import DaemonConfig
from skueue.runtime.data_lock import DataDirLock
from skueue.runtime.disk_space import DiskSpace
from skueue.runtime.entry_store import SnapshotEntryStore
from skueue.runtime.health import PhaseWatch, Readiness, readiness
from skueue.runtime.input_log import InputLog
from skueue.runtime.inputs import Input
from skueue.runtime.link_receiver import Inbound
from skueue.runtime.peers import PeerLinks
from skueue.runtime.removal_check import RemovalCheck
from skueue.runtime.sessions import ClientSessions
from skueue.runtime.stats import StatsGathering, local_stats
from skueue.runtime.tallies import Tallies
from skueue.runtime.usage import usage

log = structlog.get_logger("skueued")


class DaemonState:
    """Every field of the daemon, declared and initialised here, and the helpers more
    than one part uses."""

    def __init__(self, config: DaemonConfig) -> None:
        self.config = config
        self.limits = config.limits
        self.inbox_send, self.inbox = trio.open_memory_channel[Input](self.limits.inbox_items_max)
        self.sessions = ClientSessions(
            self.limits,
            self.inbox_send,
            self.welcome,
            config.client_tokens,
            client_certs=config.tls is not None and config.tls.client_issuers is not None,
            tls=config.tls is not None,
        )
        self.ready = trio.Event()
        self.host: Host | None = None
        self.address: Address = config.listen
        self.process_id = config.process_id or ""
        self.links: PeerLinks | None = None
        self.directory: Directory | None = None
        # The newest incoming session of each peer, and how to end it (a bad frame).
        self.peer_sessions: dict[str, tuple[int, trio.CancelScope]] = {}
        # What this daemon took from each peer's link, across its connections.
        self.inbound: dict[str, Inbound] = {}
        self.ack_due: float | None = None  # when the owner next acknowledges (owner.py)
        # The write-ahead log of inputs (None: an in-memory daemon), and whether the
        # daemon is replaying it (runtime/input_log.py, runtime/replay.py).
        self.input_log: InputLog | None = None
        self.replaying = False
        self.clock_read = False  # the lease clock went to the core in this step (owner.py)
        # Where the DHT tables keep their elements (None: in memory; runtime/entry_store.py).
        self.entry_store: SnapshotEntryStore | None = None
        # The data directory's free space against the reserve (None: in memory).
        self.disk: DiskSpace | None = None
        self.data_lock: DataDirLock | None = None  # held while the daemon runs
        self.session_numbers = itertools.count(1)
        self.stats = StatsGathering(self.limits.stats_timeout_s)
        # skueue remove-member: the checks waiting for the members' answers.
        self.removal_checks: dict[int, RemovalCheck] = {}
        self.removal_numbers = itertools.count(1)
        self.tallies = Tallies()  # what the metrics count (runtime/tallies.py)
        self.phase_watch = PhaseWatch()  # how long an update phase lasts (runtime/health.py)
        self.nursery: trio.Nursery | None = None
        # Membership: clients waiting for a join or a leave to go through.
        self.joined = trio.Event()
        self.left = trio.Event()
        self.join_waiters: list[tuple[int, int]] = []
        self.pending_join_effects: list[Effect] = []
        self.leave_waiters: list[tuple[int, int]] = []

    def welcome(self) -> list[Any]:
        raise NotImplementedError  # the daemon's: what a client is told when it connects

    def _disk_stats(self) -> dict[str, Any]:
        """The data directory's free space as last read, the reserve, and the enqueues
        refused for it (runtime/disk_space.py)."""
        disk = self.disk
        if disk is None:
            return {}
        return {
            "free_bytes": disk.read(trio.current_time()),
            "reserve_bytes": disk.reserve_bytes,
            "refused_for_space": disk.refused,
        }

    def _own_stats(self) -> dict[str, Any]:
        """This process's part of ``skueue stats``: the host's, plus the elements whose
        replies never reached their client (counted by the sessions)."""
        assert self.host is not None
        stats = local_stats(self.host)
        stats["dropped_results"] += self.sessions.dropped_results
        log = self.input_log
        durable = None if log is None else {
            "data_dir": str(log.directory),
            "log_bytes": log.end,
            "segment": log.segment,
            "fsync": log.policy.mode,
            **self._disk_stats(),
        }
        ready = self.readiness()
        down = self.links.down() if self.links is not None else {}
        return {
            **stats,
            "address": str(self.address),
            "durable": durable,
            "ready": ready.ready,
            "ready_reason": ready.reason,
            # What skueue top shows of each member besides the counters above.
            "peers_down": {p: round(s, 1) for p, s in down.items()},
            **usage(),
        }

    def readiness(self) -> Readiness:
        """Whether this daemon is ready to serve, and if not why (runtime/health.py)."""
        started = self.ready.is_set() and self.host is not None and self.links is not None
        return readiness(
            self.host.process.stats() if started and self.host is not None else None,
            self.links.down() if started and self.links is not None else {},
            self.phase_watch,
            self.limits.update_phase_stall_s,
            trio.current_time(),
        )

    def _why_no_answer(self) -> str:
        """What the daemon knows of why the cluster is not answering (for timeouts)."""
        assert self.links is not None and self.directory is not None
        down = self.links.down()
        if not down:
            return "no member is known to be down (overloaded, or in an update phase?)"

        def named(process: str) -> str:
            address = str(self.directory.address(process) if self.directory else None)
            return process if address == process else f"{process} at {address}"

        return "members unreachable: " + ", ".join(
            f"{named(p)} ({'restarted without its state' if p in self.links.restarted else 'down'}"
            f" for {s:.0f} s)"
            for p, s in down.items()
        )

    def _send_control(self, out: list[tuple[str, list[Any]]]) -> None:
        """Send control frames (gossip, stats) to peers.  They do not follow from the
        process's inputs, so the input log keeps them as they are, and a replay sends the
        logged ones instead of making them again."""
        assert self.host is not None
        if self.replaying:
            return
        for to, frame in out:
            self.host.peer_frames[to].append(frame)
            self._log(["o", to, frame])

    def _log(self, record: list[Any]) -> None:
        if self.input_log is not None and not self.replaying:
            self.input_log.append(record)

    def _drop_peer_session(self, peer: str) -> None:
        session = self.peer_sessions.get(peer)
        if session is not None:
            session[1].cancel()

    def _refuse_stranger(self, peer: str, nonce: str | None, address: object) -> None:
        """A daemon started with ``--peers`` naming us, though it is no member of our
        cluster: it is refused (told to use --join) and nothing of it is kept."""
        assert self.directory is not None
        if self.directory.is_refused(peer, nonce):
            return  # said once already
        self.directory.refuse(peer, nonce)
        log.warning(
            "refused a daemon that is not a member of this cluster (started with --peers; "
            "told to start with --join)",
            peer=peer,
            address=str(address),
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

