"""Logarithmic aggregation-tree height and routing hops on random static rings.

The rings are built globally (``overlay.ring.build_views``), as a simulator would; the tree
and the routes use each node's local view only.  Numbers to compare with are SPEC §2-§3's
calibration; ``bench/routing_hops.py`` prints the full table.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from skueue.overlay.labels import LABEL_SPACE, NodeRef
from skueue.overlay.ring import build_views, tree_height
from skueue.overlay.routing import next_hop, start_route
from skueue.overlay.view import View

Views = dict[NodeRef, View]

HEIGHT_CALIBRATION = {16: 13, 32: 20, 128: 31, 512: 45, 1024: 53}
HEIGHT_SEEDS = 20
ROUTE_SIZES = [16, 64, 256, 1024]
ROUTE_SEEDS = 3
ROUTES_PER_RING = 150


def random_ring(n: int, seed: int) -> Views:
    rng = random.Random(seed)
    return build_views(f"p{rng.getrandbits(64):016x}" for _ in range(n))



def route_hops(views: Views, start: NodeRef, target: int) -> int:
    node = start
    route = start_route(views[node], target)
    while True:
        hop, route = next_hop(views[node], route)
        if hop is None:
            return route.hops
        node = hop
        assert route.hops < 10 * len(views), f"runaway route {route.describe()}"


def slope_per_doubling(sizes: list[int], values: list[float]) -> float:
    """Least-squares slope of ``values`` against log2(size)."""
    xs = [math.log2(n) for n in sizes]
    mx, my = statistics.mean(xs), statistics.mean(values)
    return sum((x - mx) * (y - my) for x, y in zip(xs, values, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


@pytest.fixture(scope="module")
def mean_heights() -> dict[int, float]:
    return {
        n: statistics.mean(tree_height(random_ring(n, seed)) for seed in range(HEIGHT_SEEDS))
        for n in HEIGHT_CALIBRATION
    }


def test_tree_height_is_logarithmic(mean_heights: dict[int, float]) -> None:
    """The aggregation tree (parent = leftmost neighbour) has height O(log n): mean heights
    over 20 random rings lie within 30% of SPEC §3's calibration (13, 20, 31, 45, 53 for
    n = 16 .. 1024), and each doubling of n adds a bounded number of levels (the calibration
    adds 6-7: one virtual hop plus about three predecessor steps per halving of a label).

    Reference: §III-B, Corollary 6
    """
    table = ", ".join(f"n={n}: {h:.1f}" for n, h in mean_heights.items())
    for n, calibration in HEIGHT_CALIBRATION.items():
        assert 0.7 * calibration <= mean_heights[n] <= 1.3 * calibration, table
    sizes = list(mean_heights)
    for small, large in zip(sizes, sizes[1:], strict=False):
        per_doubling = (mean_heights[large] - mean_heights[small]) / math.log2(large / small)
        assert 0 < per_doubling < 12, (
            f"{small} -> {large}: {per_doubling:.1f} per doubling; {table}"
        )
    assert 3 < slope_per_doubling(sizes, list(mean_heights.values())) < 10, table


def test_routing_hops_grow_logarithmically() -> None:
    """De Bruijn routing reaches pred(t) in O(log n) hops from local knowledge: mean hops
    over random starts and targets grow linearly in log2 n with a positive slope of a few
    hops per doubling, and stay far below a linear walk (under 60 at n = 1024; SPEC §2's
    calibration is about 32, counting virtual hops).

    Reference: §II-A, Lemma 3
    """
    means: list[float] = []
    for n in ROUTE_SIZES:
        hops: list[int] = []
        for seed in range(ROUTE_SEEDS):
            views = random_ring(n, seed)
            nodes = list(views)
            rng = random.Random(f"{n}-{seed}")
            hops.extend(
                route_hops(views, rng.choice(nodes), rng.randrange(LABEL_SPACE))
                for _ in range(ROUTES_PER_RING)
            )
        means.append(statistics.mean(hops))
    table = ", ".join(f"n={n}: {h:.1f}" for n, h in zip(ROUTE_SIZES, means, strict=True))
    slope = slope_per_doubling(ROUTE_SIZES, means)
    assert 0.5 < slope < 8, f"{slope:.2f} hops per doubling; {table}"
    assert means[-1] < 60, table
    assert means == sorted(means), f"mean hops should grow with n; {table}"
