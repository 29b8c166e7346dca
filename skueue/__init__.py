"""Skueue: a scalable, linearizable peer-to-peer distributed queue and stack.

The public API, re-exported names only:

    async with skueue.connect("127.0.0.1:7400") as q: ...      # trio or asyncio
    with skueue.connect_blocking("127.0.0.1:7400") as q: ...   # plain scripts
    with skueue.local_cluster(processes=4) as cluster: ...     # a cluster in-process
"""

from skueue.client import (
    BlockingClient,
    Client,
    Inserted,
    NodeUnavailable,
    NodeUnreachable,
    Removed,
    RequestRejected,
    RequestTimeout,
    SkueueError,
    connect,
    connect_blocking,
)
from skueue.local import LocalCluster, local_cluster

__all__ = [
    "BlockingClient",
    "Client",
    "Inserted",
    "LocalCluster",
    "NodeUnavailable",
    "NodeUnreachable",
    "Removed",
    "RequestRejected",
    "RequestTimeout",
    "SkueueError",
    "connect",
    "connect_blocking",
    "local_cluster",
]
