"""How many replicas a daemon runs with when ``--replicas`` is not given, and whether it
fails over when ``--failover`` is not (issue 31; README, When a member dies).

- **The default: 3 replicas where the cluster starts with at least 3 members** and the
  daemon keeps a data directory (a replica acknowledges what it holds on disk); else 1.
  Every member of a static cluster is given the others (``--peers``), so they all decide
  the same.
- **A restart keeps what its data directory was started with** (``meta.json``): a
  cluster started before this default, or with ``--replicas 1``, stays as it was, and a
  member does not change its mind when members left or joined while it was down.
- **A joiner takes its seed's**: its hello to the seed says ``replicas: 0`` ("yours"),
  and the seed's hello answers with its own (runtime/network/peers.py).
- **Failover comes with replication**: a replicated member takes over a member that is
  down, unless ``--no-failover`` says otherwise.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from skueue.host.address import Address
from skueue.runtime.config import DaemonConfig
from skueue.runtime.durability.input_log import read_meta
from skueue.runtime.errors import DaemonError
from skueue.runtime.network.handshake import REPLICAS_AUTO

# The replicas of a cluster that starts with at least that many members: one host may
# be lost (RabbitMQ's quorum queues start with 3; NATS JetStream and Redpanda advise 3
# for production).
DEFAULT_REPLICAS = 3


def default_replicas(members: int) -> int:
    """The replicas of a durable cluster that starts with ``members`` members not given
    ``--replicas`` (in memory: 1, :func:`decide`)."""
    return DEFAULT_REPLICAS if members >= DEFAULT_REPLICAS else 1


def decide(config: DaemonConfig, directory: Path | None, address: Address) -> DaemonConfig:
    """``config`` with its replicas decided where the daemon can decide alone (a joiner
    on its first start cannot: it stays ``REPLICAS_AUTO`` until its seed answers, see
    :func:`adopt`), and failover decided with them."""
    k = config.replicas
    if k == REPLICAS_AUTO:
        if directory is None:
            k = 1  # in memory: nothing to acknowledge from disk
        elif (directory / "meta.json").exists():
            k = read_meta(directory / "meta.json").replicas
        elif config.join is None:
            k = default_replicas(len({str(a) for a in config.peers} | {str(address)}))
        else:
            return config
    return adopt(config, k)


def adopt(config: DaemonConfig, k: int) -> DaemonConfig:
    """``config`` with ``k`` replicas, failover as given or with replication, checked."""
    failover = k > 1 if config.failover is None else config.failover
    if k == 1 and config.failover:
        raise DaemonError(
            "--failover needs --replicas 3 or 5, and this daemon runs with 1 (fewer than "
            f"{DEFAULT_REPLICAS} members at the first start, in memory, or as its data "
            "directory was started)"
        )
    if k == 1 and config.restore_from_copies:
        raise DaemonError(
            "--restore-from-copies needs --replicas 3 or 5, and this daemon runs with 1: "
            "no other member keeps a copy of its process"
        )
    return attrs.evolve(config, replicas=k, failover=failover)
