"""Skueue: a scalable, linearizable peer-to-peer distributed queue and stack.

The public API, re-exported names only:

    async with skueue.connect("127.0.0.1:7400") as q: ...      # trio or asyncio
    with skueue.connect_blocking("127.0.0.1:7400") as q: ...   # plain scripts
    with skueue.local_cluster(processes=4) as cluster: ...     # a cluster in-process

The names are imported on first use, so ``import skueue`` (or of any module below it,
such as the pure core) loads neither the client nor the daemon.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skueue.client.api import Client, connect
    from skueue.client.blocking import BlockingClient, connect_blocking
    from skueue.client.errors import (
        BadAddress,
        NodeUnavailable,
        NodeUnreachable,
        ProcessMoved,
        RequestRejected,
        RequestTimeout,
        SkueueError,
    )
    from skueue.cluster.inprocess import LocalCluster, local_cluster
    from skueue.host.results import Inserted, Removed

_WHERE = {
    "BadAddress": "skueue.client.errors",
    "BlockingClient": "skueue.client.blocking",
    "Client": "skueue.client.api",
    "Inserted": "skueue.host.results",
    "NodeUnavailable": "skueue.client.errors",
    "NodeUnreachable": "skueue.client.errors",
    "ProcessMoved": "skueue.client.errors",
    "Removed": "skueue.host.results",
    "RequestRejected": "skueue.client.errors",
    "RequestTimeout": "skueue.client.errors",
    "SkueueError": "skueue.client.errors",
    "connect": "skueue.client.api",
    "connect_blocking": "skueue.client.blocking",
    "LocalCluster": "skueue.cluster.inprocess",
    "local_cluster": "skueue.cluster.inprocess",
}

__all__ = [
    "BadAddress",
    "BlockingClient",
    "Client",
    "Inserted",
    "LocalCluster",
    "NodeUnavailable",
    "NodeUnreachable",
    "ProcessMoved",
    "Removed",
    "RequestRejected",
    "RequestTimeout",
    "SkueueError",
    "connect",
    "connect_blocking",
    "local_cluster",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'skueue' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
