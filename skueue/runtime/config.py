"""The daemon's configuration: where it listens, whom it joins, and its limits."""

from __future__ import annotations

from pathlib import Path

import attrs

from skueue.core.ops import Structure
from skueue.host.address import Address
from skueue.runtime.durability.input_log import SyncPolicy
from skueue.runtime.limits import Limits
from skueue.runtime.security.client_auth import ClientTokens
from skueue.runtime.security.peer_auth import ClusterKeys
from skueue.runtime.security.tls import DaemonTls


@attrs.frozen
class DaemonConfig:
    listen: Address
    peers: tuple[Address, ...] = ()
    process_id: str | None = None
    structure: Structure = Structure.QUEUE
    limits: Limits = Limits()
    join: Address | None = None  # join the cluster this daemon belongs to (SPEC §8)
    # Where the other members reach this daemon, when that is not the listen address (a
    # container's port mapping, NAT, a proxy); also the default process id.
    advertise: Address | None = None
    # Durable: the write-ahead log of inputs lives here (runtime/durability/input_log.py); None: the
    # daemon keeps everything in memory and loses it with the process.
    data_dir: Path | None = None
    # Without data_dir: the daemon's directory is named after its process id in here (the
    # command line's default); None too: in memory.
    data_root: Path | None = None
    fsync: SyncPolicy = SyncPolicy()
    # The voters of each process's replication group (skueue/host/placement.py): 1, 3 or
    # 5, at most the members; more than 1 needs a data directory.  REPLICAS_AUTO (the
    # command line's default, runtime/network/handshake.py): decided at start
    # (runtime/replica_count.py).
    replicas: int = 1
    # Start in place of a member lost with its disk, from its group's copies
    # (runtime/restore.py): the data directory must be empty.
    restore_from_copies: bool = False
    # A member's follower slots stand for election when its leader is silent for an
    # election timeout, and the winner serves the process (runtime/stand_in.py).  None
    # (the command line's default): with more than one replica.
    failover: bool | None = False
    # Where a stand-in listens (runtime/stand_in.py): the first free port of this range
    # on the listen host; None, or none free: a port the system picks.
    stand_in_ports: tuple[int, int] | None = None
    # The cluster key(s) every peer link proves (runtime/security/peer_auth.py); None: no key.
    cluster_keys: ClusterKeys | None = None
    # The tokens clients must present, with their roles (runtime/security/client_auth.py).
    client_tokens: ClientTokens | None = None
    # Where to serve Prometheus metrics, /healthz and /readyz
    # (runtime/operations/metrics.py); None: not.
    metrics: Address | None = None
    # TLS on every connection (runtime/security/tls.py); None: plaintext.
    tls: DaemonTls | None = None
