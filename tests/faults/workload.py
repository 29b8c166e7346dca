"""What the fault tests share: their sizes (quick in CI, ``SKUEUE_FAULTS=long`` once), the
seed that replays a run, and the workload run while faults happen, then drained."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import anyio
import trio

from skueue.cluster.loadgen import LoadConfig, LoadResult, drain, run_workload

LONG = os.environ.get("SKUEUE_FAULTS") == "long"
SEED = int(os.environ.get("SKUEUE_FAULT_SEED", "11"))
DAEMONS = 4
CLIENTS = 8
SETTLE_S = 10.0
"""In the quick profile the workload stops this long after the faults are over: time
for a failover (3 to 6 s) and operations after it, rather than the rest of its count."""


def fault_load(nodes: list[str], ops: int) -> LoadConfig:
    """The mixed workload of every fault test; requests may wait out a restart."""
    return LoadConfig(
        nodes=tuple(nodes),
        clients=CLIENTS,
        ops=ops,
        insert_ratio=0.55,
        value_bytes=32,
        seed=SEED,
        request_timeout_s=60.0,
    )


async def under_faults(
    load: LoadConfig, faults: Callable[[], Awaitable[None]], timeout_s: float
) -> LoadResult:
    """Run the workload while ``faults`` runs; stop the faults when the workload is done
    (they are bounded themselves too), then drain.  In the quick profile the workload
    stops ``SETTLE_S`` after the faults are over (the long one does all of it)."""
    over: list[bool] = []
    done = [0]

    def count(finished: int, _total: int) -> None:
        done[0] = finished

    async def faults_then_settle() -> None:
        await faults()
        if not LONG:
            await trio.sleep(SETTLE_S)
            over.append(True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(faults_then_settle)
        try:
            with anyio.fail_after(timeout_s):
                result = await run_workload(load, progress=count, stop=lambda: bool(over))
        except TimeoutError:
            # Say how far it got: a wedge (no progress for long) and a slow run differ.
            raise TimeoutError(
                f"the workload did {done[0]} of {load.ops} operations in {timeout_s:.0f} s"
            ) from None
        nursery.cancel_scope.cancel()
    with anyio.fail_after(timeout_s):
        await drain(load, result)
    return result
