"""Routing hops and aggregation-tree height on random static rings (SPEC §2-§3).

Rerun the numbers in the README::

    .venv/bin/python bench/routing_hops.py
    .venv/bin/python bench/routing_hops.py --n 16 256 1024 --seeds 20 --routes 500
    .venv/bin/python bench/routing_hops.py --over-log-3n -3 -2 0 2   # tune routing's k

For each ``n`` and seed the script builds the static ring of ``n`` random processes (the
simulator's global view), routes messages from random nodes to random points by calling
``next_hop`` node after node, exactly as the protocol does, and measures the tree height as
the deepest node's number of parent edges to the anchor.

Columns: ``k`` is the mean number of De Bruijn bits a route chose; ``hops`` counts every
edge a message crosses; ``net`` leaves out the virtual edges between the nodes of one
process, which a driver delivers inside the process (so ``net`` is what costs rounds);
``calib`` quotes SPEC's calibration (hops with ``k = ceil(log2 n) + 2``, heights).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skueue.overlay import routing  # noqa: E402
from skueue.overlay.labels import LABEL_SPACE, NodeRef  # noqa: E402
from skueue.overlay.ring import build_views, tree_height  # noqa: E402
from skueue.overlay.view import View  # noqa: E402

CALIBRATION_HOPS = {16: 18, 256: 27, 1024: 32, 4096: 40, 16384: 43}
CALIBRATION_HEIGHT = {16: 13, 32: 20, 128: 31, 512: 45, 1024: 53}
HOPS_MAX_FACTOR = 50  # a route longer than this many hops per bit is a bug, not a tail


def random_ring(n: int, seed: int) -> dict[NodeRef, View]:
    rng = random.Random(seed)
    return build_views(f"p{rng.getrandbits(64):016x}" for _ in range(n))



def route(views: dict[NodeRef, View], start: NodeRef, target: int) -> tuple[int, int, int]:
    """(bits, hops, network hops) of one message from ``start`` to ``pred(target)``."""
    node = start
    state = routing.start_route(views[node], target)
    bits = state.bits
    net = 0
    cap = HOPS_MAX_FACTOR * (bits + 2) + 3 * len(views)
    while True:
        hop, state = routing.next_hop(views[node], state)
        if hop is None:
            return bits, state.hops, net
        if hop.process != node.process:
            net += 1
        node = hop
        if state.hops > cap:
            raise RuntimeError(f"route exceeded {cap} hops: {state.describe()}")


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(n: int, seeds: int, routes: int, heights: bool) -> dict[str, float]:
    bits: list[int] = []
    hops: list[int] = []
    net: list[int] = []
    height: list[int] = []
    for seed in range(seeds):
        views = random_ring(n, seed)
        nodes = list(views)
        rng = random.Random(f"routes-{n}-{seed}")
        for _ in range(routes):
            b, h, w = route(views, rng.choice(nodes), rng.randrange(LABEL_SPACE))
            bits.append(b)
            hops.append(h)
            net.append(w)
        if heights:
            height.append(tree_height(views))
    return {
        "k": statistics.mean(bits),
        "hops": statistics.mean(hops),
        "hops_p99": percentile(hops, 0.99),
        "net": statistics.mean(net),
        "net_p99": percentile(net, 0.99),
        "height": statistics.mean(height) if height else math.nan,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[16, 256, 1024, 4096, 16384])
    parser.add_argument("--seeds", type=int, default=5, help="rings per n (default 5)")
    parser.add_argument("--routes", type=int, default=400, help="routes per ring (default 400)")
    parser.add_argument(
        "--over-log-3n",
        type=int,
        nargs="+",
        default=[routing.BITS_OVER_LOG_3N],
        help="routing.BITS_OVER_LOG_3N values to compare (default: the module's)",
    )
    parser.add_argument("--no-height", action="store_true", help="skip the tree heights")
    args = parser.parse_args(argv)

    print(
        f"{'over':>5} {'n':>6} {'log2n':>6} {'k':>6} {'hops':>6} {'p99':>4} "
        f"{'net':>6} {'p99':>4} {'calib':>5} {'height':>7} {'calib':>5} {'s':>5}"
    )
    default = routing.BITS_OVER_LOG_3N
    try:
        for over in args.over_log_3n:
            routing.BITS_OVER_LOG_3N = over
            for n in args.n:
                began = time.perf_counter()
                m = measure(n, args.seeds, args.routes, heights=not args.no_height)
                height = "-" if math.isnan(m["height"]) else f"{m['height']:.1f}"
                print(
                    f"{over:>5} {n:>6} {math.log2(n):>6.1f} {m['k']:>6.1f} {m['hops']:>6.1f} "
                    f"{m['hops_p99']:>4.0f} {m['net']:>6.1f} {m['net_p99']:>4.0f} "
                    f"{CALIBRATION_HOPS.get(n, '-'):>5} {height:>7} "
                    f"{CALIBRATION_HEIGHT.get(n, '-'):>5} {time.perf_counter() - began:>5.1f}",
                    flush=True,
                )
    finally:
        routing.BITS_OVER_LOG_3N = default


if __name__ == "__main__":
    main()
