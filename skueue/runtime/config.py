"""The daemon's configuration: where it listens, whom it joins, and its limits."""

from __future__ import annotations

import attrs

from skueue.core.ops import Structure
from skueue.runtime.address import Address
from skueue.runtime.limits import Limits


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

