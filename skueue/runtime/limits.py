"""Every limit of the runtime in one place, units last in the names."""

from __future__ import annotations

import attrs

from skueue.host.retries import RETRY_WINDOW_BYTES_MAX, RETRY_WINDOW_REQUESTS_MAX
from skueue.wire.framing import FRAME_BYTES_MAX


@attrs.frozen
class Limits:
    frame_bytes_max: int = FRAME_BYTES_MAX
    value_bytes_max: int = 1024 * 1024
    ops_per_request_max: int = 10_000
    # Requests a client may have outstanding; its reader waits past this (backpressure).
    requests_per_client_max: int = 64
    clients_max: int = 1024
    # Inputs waiting for the owner task.  Protocol traffic is bounded by the operations in
    # flight (each needs a handful of messages), so this bound is generous on purpose: a
    # small one could deadlock two daemons that wait on each other's full inboxes.
    inbox_items_max: int = 1_000_000
    client_replies_max: int = 1024
    inputs_per_step_max: int = 4096
    # Pacing of an idle tree: the delay before sending an empty batch starts here and
    # doubles with every idle tick up to the maximum; any operation resets it.  The
    # maximum bounds an idle daemon's CPU (100 ms: about 1.3% of a core on the
    # development machine) and how fast an idle cluster notices a join or a leave; a
    # first operation does not wait for it (Hurry hints, core/process.py).
    idle_tick_min_ms: float = 1.0
    idle_tick_max_ms: float = 100.0
    wait_tick_ms: float = 1000.0  # safety-net tick when every node waits for a message
    connect_timeout_s: float = 30.0
    join_timeout_s: float = 10.0  # reaching the seed of the cluster to join
    stats_timeout_s: float = 2.0
    handshake_timeout_s: float = 10.0
    # Client connections (sessions.py).  A client with no request outstanding that sends
    # nothing for this long is closed, so idle clients cannot hold every slot.
    idle_connection_timeout_s: float = 300.0
    # A frame once started must arrive whole within this (a stalled frame holds memory).
    frame_read_timeout_s: float = 30.0
    # A reply write that makes no progress for this long: the client is not reading.
    reply_write_timeout_s: float = 60.0
    # Bytes held for client frames not yet whole, all client connections together (one
    # connection holds at most frame_bytes_max: a larger frame is skipped, not buffered).
    # A connection that would go over it is closed.  Peer links are not counted: a
    # member's link must not be cut for a stranger's bytes.
    partial_frame_bytes_total_max: int = 64 * 1024 * 1024
    # Connections that have not said who they are yet (no hello, or a peer before its
    # cluster-key proof): in all, and from one address (past either, the oldest of them
    # is closed), and the size of that first frame.
    hello_pending_max: int = 256
    hello_pending_per_source_max: int = 32
    hello_bytes_max: int = 4096
    # Connections that said they are administrative (stats, join, leave only), on top of
    # clients_max, so that an operator can always get in.
    admin_clients_max: int = 8
    # Membership and failures (the lead's block; other blocks above).
    peers_wait_report_s: float = 5.0  # how often start-up says which peers it still awaits
    # skueue remove-member: a member whose address accepts a connection within this long
    # is not gone, and is not removed (runtime/member_removal.py).
    member_probe_timeout_s: float = 3.0
    # Frames for one peer not acknowledged yet (runtime/network/link_sender.py): they wait while
    # it is down or its address has not arrived.  The protocol itself bounds them (a
    # stalled tree sends no new batches), so reaching this means something else is
    # wrong; the link is then given up, loudly, rather than the daemon's memory.
    outbox_bytes_max: int = 256 * 1024 * 1024
    # A peer link whose frames wait this long for an ack is reconnected (link_sender.py,
    # watch_acks): it may be half open, or the peer may wait for the rest of a record cut
    # on the path.  Acks come within ACK_DELAY_S (20 ms) of the step that handled the
    # frames, so this is generous; a peer busy replaying its log at a restart takes no
    # frames for a while, and only costs a reconnect or two.
    peer_ack_timeout_s: float = 10.0
    # Replication (--replicas above 1, runtime/replicas.py): a leader beats for its
    # followers every heartbeat_interval_s, and one that heard from no majority for a
    # failure timeout (ReplicaSettings.election_ticks heartbeats) steps down.
    heartbeat_interval_s: float = 0.3
    # A follower behind its leader's last snapshot gets the snapshot's state
    # (runtime/snapshot_transfer.py) in parts of this size on the daemon channel (at
    # most half a frame, whatever this says), and takes at most this much in all (past
    # it, the leader sends none and the follower keeps the log without a state).
    snapshot_chunk_bytes: int = 1024 * 1024
    # At each of its snapshots a leader sends its followers the digest of its state, to
    # check theirs against (runtime/applied_state.py), while the state holds at most
    # this many elements: the digest walks the whole state, about 1.8 us per element
    # (0.35 s at 200,000 on the development machine: bench/replica_check_cost.py), a
    # pause of the leader's process.
    replica_check_elements_max: int = 200_000
    snapshot_transfer_bytes_max: int = 1024 * 1024 * 1024
    # With --failover: a member whose daemon channel has been down this long is taken
    # for lost for good, as if skueue remove-member had said so, and the groups led here
    # replace it (runtime/re_replication.py); 0: only the command does (--member-lost-after).
    member_lost_after_s: float = 300.0
    # Copies of other processes' logs one daemon keeps (runtime/re_replication.py): its
    # k - 1 placed ones and those leaders added it to when a host was lost.  A leader's
    # first append for a group past it is refused (logged), and that leader picks no
    # other host: the operator sees the warning and the group's two voters in stats.
    replica_copies_max: int = 32
    # Frames waiting for one member's daemon channel (stats and removal checks,
    # runtime/network/daemon_channel.py) while it cannot be reached; past it the oldest
    # go (whoever asked times out, as when the member never answers).
    channel_frames_max: int = 4096
    # Element bytes per message of a leave or join handover (a larger element goes alone),
    # so that a daemon holding any amount of data can leave within the frame limit.
    handover_bytes_max: int = 4 * 1024 * 1024
    # A client request not answered in this time gets an error naming the members that
    # are down (the client may ask for a shorter or longer time in its hello).
    request_timeout_s: float = 10.0
    # Finished requests of clients with a session, kept so that a retry gets the first
    # attempt's outcome (host/retries.py): a retry later than this runs again.
    retry_window_requests_max: int = RETRY_WINDOW_REQUESTS_MAX
    retry_window_bytes_max: int = RETRY_WINDOW_BYTES_MAX
    # A durable daemon compacts its input log into a snapshot when the log reaches this
    # size: a restart replays at most this much on top of the snapshot.
    snapshot_log_bytes: int = 64 * 1024 * 1024
    # A durable daemon keeps the elements in page files (runtime/durability/entry_store.py): their
    # size, and how many of them are mapped at once.  A queue writes at one end and reads
    # at the other, so a few suffice; they bound the memory the elements take.
    entry_page_bytes: int = 4 * 1024 * 1024
    entry_pages_mapped_max: int = 4
    # Below this much free space in its data directory, a durable daemon refuses its
    # clients' enqueues (retryably) and serves the rest (runtime/durability/disk_space.py).  Room
    # for a snapshot written beside the last one (each up to the retry window's 64 MiB
    # plus the state) and a log extent of 16 MiB.  0: never refuse.
    disk_free_min_bytes: int = 256 * 1024 * 1024
    request_timeout_s_max: float = 3600.0
    # The metrics and health address (--metrics; runtime/operations/http_probe.py): connections
    # served at once (past it a new one gets 503 at once), the bytes of a request's head,
    # and the time a connection may take from accept to the end of its response.
    http_connections_max: int = 16
    http_request_bytes_max: int = 8192
    http_request_timeout_s: float = 5.0
    # A member in one update phase for this long is not ready
    # (/readyz; runtime/operations/health.py).
    update_phase_stall_s: float = 30.0

    def __attrs_post_init__(self) -> None:
        if self.entry_page_bytes < self.value_bytes_max:
            raise ValueError(
                f"entry_page_bytes ({self.entry_page_bytes}) must hold the largest element "
                f"(value_bytes_max, {self.value_bytes_max})"
            )
        if self.snapshot_chunk_bytes < 1:
            raise ValueError("snapshot_chunk_bytes must be at least 1")
        if self.entry_pages_mapped_max < 2:
            raise ValueError("entry_pages_mapped_max must be at least 2 (a head and a tail)")
