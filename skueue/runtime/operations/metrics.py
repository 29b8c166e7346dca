"""``skueued --metrics ADDR``: Prometheus metrics, ``/healthz`` and ``/readyz``.

The metric families are built only when someone scrapes, by a custom collector on a
private :class:`~prometheus_client.CollectorRegistry`, from what the daemon knows
already: the core's own account (:meth:`Process.stats`), the host's counters, the
per-queue statistics, the owner's tallies (:mod:`skueue.runtime.operations.tallies`), the links,
the input log and the client sessions.  The HTTP server
(:mod:`skueue.runtime.operations.http_probe`) runs in the daemon's trio thread, so the
collector reads all of it between two owner steps; prometheus_client's own thread server
would read it from another thread.

Counters are totals over the life of the data directory where the daemon keeps them
(operations, per-queue counts: they come back from the snapshot and the replay), and
over the life of the process otherwise (requests, batches, links, fsyncs); Prometheus
takes a restart's reset in its stride either way.  ``process_*`` (CPU, RSS, open files)
come from prometheus_client's ``ProcessCollector`` (Linux).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from skueue.host.queue_stats import LEASE_COUNT_NAMES
from skueue.runtime.operations.http_probe import Handler, HttpProbe, Response, text
from skueue.runtime.operations.tallies import Histogram

if TYPE_CHECKING:
    from skueue.runtime.daemon import Daemon

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DISK_SCAN_FILES_MAX = 100_000
"""Files counted for ``skueue_disk_bytes`` at most (a data directory holds a few dozen)."""


def probe(daemon: Daemon) -> HttpProbe:
    """The HTTP server of ``--metrics``: ``/metrics``, ``/healthz`` and ``/readyz``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DaemonCollector(daemon))
    ProcessCollector(registry=registry)

    def metrics(_: str) -> Response:
        return Response(200, generate_latest(registry), CONTENT_TYPE)

    def healthz(_: str) -> Response:
        return text(200, "alive\n")

    def readyz(_: str) -> Response:
        ready = daemon.readiness()
        return text(200 if ready.ready else 503, ready.reason + "\n")

    routes: dict[str, Handler] = {"/metrics": metrics, "/healthz": healthz, "/readyz": readyz}
    return HttpProbe(routes, daemon.ctx.limits)


def histogram(name: str, doc: str, label: str, by: dict[str, Histogram]) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=[label] if label else [])
    for value, h in sorted(by.items()):
        family.add_metric([value] if label else [], h.cumulative(), h.sum)
    return family


def counter(name: str, doc: str, labels: list[str], values: dict[tuple[str, ...], int]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def gauge(name: str, doc: str, labels: list[str], values: dict[tuple[str, ...], float]) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


class DaemonCollector(Collector):
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[Metric]:
        d = self.daemon
        ready = d.readiness()
        yield gauge(
            "skueue_ready",
            "1 if this member is ready to serve (see /readyz)",
            [],
            {(): float(ready.ready)},
        )
        yield from self._clients()
        yield from self._requests()
        yield from self._peers()
        yield from self._storage()
        if d.owner is None:
            return  # still starting: no process yet
        yield from self._process()
        yield from self._queues()
        yield from self._batches()

    def _process(self) -> Iterator[Metric]:
        d = self.daemon
        assert d.owner is not None
        host, core = d.owner.host.clients, d.owner.host.process.stats()
        yield gauge(
            "skueue_member_info",
            "this daemon's process id and structure (always 1)",
            ["process", "structure"],
            {(core.process_id, core.structure.value): 1.0},
        )
        state = {
            "joined": core.joined,
            "leaving": core.leaving,
            "departed": core.departed,
            "anchor": core.anchor,
        }
        yield gauge(
            "skueue_member_state",
            "1 where this member is joined, leaving, departed, or holds the anchor",
            ["state"],
            {(k,): float(v) for k, v in state.items()},
        )
        c = host.counters
        yield counter(
            "skueue_operations_total",
            "operations completed here, by kind and outcome "
            "(empty: a remove that found its queue empty)",
            ["op", "outcome"],
            {
                ("insert", "ok"): c.inserted,
                ("remove", "ok"): c.removed,
                ("remove", "empty"): c.empty,
            },
        )
        yield gauge(
            "skueue_pending_operations",
            "operations submitted, not completed",
            [],
            {(): host.pending_ops},
        )
        yield counter(
            "skueue_retried_requests_total",
            "requests sent again that got their first attempt's outcome",
            [],
            {(): c.retried},
        )
        yield counter(
            "skueue_dropped_results_total",
            "removed elements whose reply never reached its client",
            [],
            {(): c.dropped_results + d.ctx.sessions.dropped_results},
        )
        yield gauge(
            "skueue_entries",
            "DHT entries stored, per virtual node",
            ["node"],
            {(n,): s.entries for n, s in core.nodes.items()},
        )
        yield gauge(
            "skueue_leases_held",
            "elements handed out with a lease, not acked or returned yet",
            [],
            {(): core.leases_held},
        )
        yield counter(
            "skueue_batches_total",
            "batches sent up the tree, per virtual node",
            ["node"],
            {(n,): s.batches_sent for n, s in core.nodes.items()},
        )
        yield counter(
            "skueue_update_phases_total",
            "update phases each virtual node took part in",
            ["node"],
            {(n,): s.phases_entered for n, s in core.nodes.items()},
        )
        yield gauge(
            "skueue_update_phase_stage",
            "the update phase's stage each virtual node is in: 0 none, 1 quiet, 2 joins, 3 leaves",
            ["node"],
            {(n,): s.phase_stage for n, s in core.nodes.items()},
        )
        if core.queues is not None:
            yield gauge(
                "skueue_queue_depth",
                "elements in each queue (at the anchor only)",
                ["queue"],
                {(q,): size for q, (size, *_) in core.queues.items()},
            )

    def _queues(self) -> Iterator[Metric]:
        assert self.daemon.owner is not None
        queues = self.daemon.owner.host.clients.queue_stats.queues
        ops: dict[tuple[str, ...], int] = {}
        leases: dict[tuple[str, ...], int] = {}
        deleted: dict[tuple[str, ...], int] = {}
        for name, q in queues.items():
            deleted[(name,)] = q.deleted
            ops[(name, "insert", "ok")] = q.inserted
            ops[(name, "remove", "ok")] = q.removed
            ops[(name, "remove", "empty")] = q.empty
            for event in LEASE_COUNT_NAMES:
                leases[(name, event)] = getattr(q, event)
        yield counter(
            "skueue_queue_operations_total",
            "operations of this daemon's clients, per queue, kind and outcome",
            ["queue", "op", "outcome"],
            ops,
        )
        yield counter(
            "skueue_queue_deleted_elements_total",
            "elements removed by deleting the queue, through this daemon's clients",
            ["queue"],
            deleted,
        )
        yield counter(
            "skueue_queue_leases_total",
            "lease events per queue: leased, acked, nacked, expired, dead_lettered",
            ["queue", "event"],
            leases,
        )

    def _requests(self) -> Iterator[Metric]:
        t = self.daemon.ctx.tallies
        yield counter(
            "skueue_requests_total",
            "client requests answered, by request and outcome (ok, or the error's code)",
            ["request", "outcome"],
            {k: v for k, v in t.requests.items()},
        )
        yield histogram(
            "skueue_request_duration_seconds",
            "from the step a request is "
            "handled in to the step its reply goes to the client's connection",
            "request",
            t.request_seconds,
        )

    def _batches(self) -> Iterator[Metric]:
        t = self.daemon.ctx.tallies
        yield histogram(
            "skueue_batch_operations",
            "operations per batch sent up the tree (batches with operations)",
            "node",
            t.batch_operations,
        )
        yield histogram(
            "skueue_batch_cycle_seconds",
            "time between two batches with operations a virtual node sent",
            "node",
            t.batch_cycle_seconds,
        )

    def _peers(self) -> Iterator[Metric]:
        links = self.daemon.ctx.links
        if links is None:
            return
        peers = sorted(set(links.senders) | set(links.down_since))
        down = links.down()
        yield gauge(
            "skueue_peer_up",
            "1 while the link to a peer is up",
            ["peer"],
            {(p,): float(p not in down) for p in peers},
        )
        senders = links.senders
        yield counter(
            "skueue_peer_frames_sent_total",
            "frames queued for each peer",
            ["peer"],
            {(p,): s.next_number - 1 for p, s in senders.items()},
        )
        yield counter(
            "skueue_peer_frames_resent_total",
            "frames written again on a new connection (retransmits)",
            ["peer"],
            {(p,): s.frames_resent for p, s in senders.items()},
        )
        yield counter(
            "skueue_peer_connections_total",
            "connections made to each peer",
            ["peer"],
            {(p,): s.connections for p, s in senders.items()},
        )
        yield gauge(
            "skueue_peer_unacknowledged_frames",
            "frames the peer has not acknowledged yet",
            ["peer"],
            {(p,): s.unacknowledged() for p, s in senders.items()},
        )
        yield gauge(
            "skueue_peer_outbox_bytes",
            "bytes kept until the peer acknowledges them",
            ["peer"],
            {(p,): s.outbox_bytes for p, s in senders.items()},
        )

    def _clients(self) -> Iterator[Metric]:
        s = self.daemon.ctx.sessions
        yield gauge(
            "skueue_client_connections",
            "client connections open, by role",
            ["role"],
            {("client",): len(s.clients) - s.admins, ("admin",): s.admins},
        )
        yield counter(
            "skueue_client_connections_total", "client connections served", [], {(): s.accepted}
        )

    def _storage(self) -> Iterator[Metric]:
        log = None if self.daemon.owner is None else self.daemon.owner.input_log
        if log is None:
            return
        yield gauge(
            "skueue_disk_bytes",
            "bytes of the data directory's files",
            [],
            {(): directory_bytes(log.directory)},
        )
        yield gauge(
            "skueue_input_log_bytes", "bytes of the input log's current segment", [], {(): log.end}
        )
        disk = self.daemon.data.disk
        if disk is not None:
            free = disk.read(trio.current_time())
            if free is not None:
                yield gauge(
                    "skueue_disk_free_bytes",
                    "free space in the data directory's file system, as last read",
                    [],
                    {(): free},
                )
            yield counter(
                "skueue_enqueues_refused_for_space_total",
                "enqueue requests refused while the data directory was under its reserve",
                [],
                {(): disk.refused},
            )
        yield histogram(
            "skueue_fsync_duration_seconds",
            "each fdatasync of the input log",
            "",
            {"": log.sync_seconds},
        )
        yield from self._replication()

    def _replication(self) -> Iterator[Metric]:
        """The process's replication group (runtime/group.py): its term, a new one at
        each start or failover, the last entry committed, and how many replicas vote."""
        group = None if self.daemon.owner is None else self.daemon.owner.group
        if group is None:
            return
        node = group.node
        yield gauge("skueue_replication_term", "the term its group is led in", [],
                    {(): node.term})  # fmt: skip
        yield gauge("skueue_replication_commit_index", "the last entry of its log committed",
                    [], {(): node.commit})  # fmt: skip
        yield gauge("skueue_replication_replicas", "the voters of its group", [],
                    {(): len(node.config.voters)})  # fmt: skip
        yield gauge("skueue_replication_learners",
                    "new replicas of its group catching up (re-replication)", [],
                    {(): len(node.config.learners)})  # fmt: skip
        if node.progress:  # it leads others: how far behind each follower is
            yield gauge("skueue_replication_lag_entries",
                        "entries of its log a follower is known not to hold", ["replica"],
                        {(host,): node.last_index - pr.match
                         for host, pr in node.progress.items()})  # fmt: skip
        replicas = self.daemon.owner.replicas if self.daemon.owner is not None else None
        if replicas is None:
            return
        yield gauge("skueue_replication_hosts_lost",
                    "members taken for lost for good (skueue remove-member, or silent "
                    "for --member-lost-after): the groups led here replace them", [],
                    {(): len(replicas.lost)})  # fmt: skip
        if replicas.failover:
            tallies = self.daemon.ctx.tallies
            yield gauge("skueue_failover_stand_ins",
                        "other members' processes this daemon serves now (failover)", [],
                        {(): len(replicas.standing)})  # fmt: skip
            yield counter("skueue_failover_takeovers_total",
                          "other members' processes this daemon began to serve, each "
                          "when its copy here was elected", [], {(): tallies.took_over})
            yield counter("skueue_failover_stand_ins_ended_total",
                          "stand-ins here that stopped: the process handed back to its "
                          "home, or led elsewhere", [], {(): tallies.stand_ins_ended})
        if not replicas.slots:
            return
        # The copies it keeps of other processes' groups (runtime/follower_slot.py).
        slots = replicas.slots
        yield gauge("skueue_replication_copy_applied_index",
                    "the last entry of another process's log its copy here applied "
                    "(absent: the copy has no state)", ["process"],
                    {(p,): s.state.applied for p, s in slots.items()
                     if s.state is not None})  # fmt: skip
        yield gauge("skueue_replication_copy_rebuilding",
                    "1 while the copy here is being rebuilt (found empty at a restart, not "
                    "caught up with its leader yet): it does not count", ["process"],
                    {(p,): int(s.node.may_have_forgotten) for p, s in slots.items()})
        yield counter("skueue_replication_copy_checks_total",
                      "checks of a copy's state against its leader's digest", ["process",
                      "outcome"],
                      {**{(p, "passed"): s.checked for p, s in slots.items()},
                       **{(p, "diverged"): s.diverged for p, s in slots.items()}})  # fmt: skip


def directory_bytes(directory: Path, files_max: int = DISK_SCAN_FILES_MAX) -> int:
    """The size of the files under ``directory`` (the first ``files_max`` of them)."""
    total, seen = 0, 0
    stack = [str(directory)]
    while stack and seen < files_max:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        seen += 1
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue  # removed under us (a snapshot's compaction): counted next time
    return total
