"""De Bruijn routing ends at pred(t) on every static ring (SPEC §2, paper Lemma 3).

The tests play the network: they hold every node's view, and step a message from node to
node by calling ``next_hop`` with the view of whichever node holds it.  The oracle is a
sorted search over all labels, which no node could do.
"""

from __future__ import annotations

import bisect
import dataclasses
import random

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from skueue.dht.keys import POSITION_MAX, position_key
from skueue.overlay.labels import HALF, LABEL_SPACE, Kind, NodeRef, ring_order
from skueue.overlay.ring import build_views
from skueue.overlay.routing import Phase, Route, is_responsible, next_hop, start_route
from skueue.overlay.view import View

Views = dict[NodeRef, View]


def random_ring(n: int, seed: int) -> Views:
    rng = random.Random(seed)
    return build_views(f"p{rng.getrandbits(64):016x}" for _ in range(n))


def true_pred(views: Views, target: int) -> NodeRef:
    """The node u with u <= target < succ(u) on the cycle, by a global sorted search."""
    order = ring_order(list(views))
    labels = [node.label for node in order]
    i = bisect.bisect_right(labels, target) - 1
    return order[i]  # i == -1: below the minimum, the maximum node owns it


def hops_cap(views: Views, bits: int) -> int:
    """A bound no correct route exceeds: ``bits`` virtual hops, ``bits - 1`` walks to a
    middle node that visit a node at most twice each, one monotone final walk."""
    size = len(views)
    return bits + max(bits - 1, 0) * 2 * size + size + 1


def deliver(views: Views, start: NodeRef, target: int, replay: str) -> tuple[NodeRef, Route]:
    """Follow next_hop from ``start``; checks every hop is a real edge of the holder."""
    node = start
    route = start_route(views[node], target)
    assert 1 <= route.bits <= 64
    cap = hops_cap(views, route.bits)
    trail: list[str] = []
    while True:
        view = views[node]
        hop, after = next_hop(view, route)
        if hop is None:
            assert after == route, "delivery leaves the route unchanged"
            return node, route
        trail.append(f"{node.describe()} {route.describe()} -> {hop.describe()}")
        edges = {view.pred, view.succ, *(node.sibling(kind) for kind in Kind)} - {node}
        assert hop in edges, f"{hop} is not a neighbour of {view.describe()} ({replay})"
        assert after.hops == route.hops + 1
        crossed = (view.succ_across_cycle and hop == view.succ) or (
            view.pred_across_cycle and hop == view.pred
        )
        if crossed and hop.process != node.process:  # a sibling is a virtual edge away
            # SPEC §2: never snap across the cycle edge; crossing it is only worth it to
            # hand the message to its owner (the maximum node owns what lies above it and
            # below the minimum label).
            assert hop == true_pred(views, target), (
                f"crossed the cycle edge from {view.describe()} ({route.describe()}; {replay})"
            )
        assert after.target == target
        if after.hops > cap:
            tail = "\n  ".join(trail[-12:])
            pytest.fail(f"route exceeded {cap} hops ({replay}); last hops:\n  {tail}")
        node, route = hop, after


def check_route(views: Views, start: NodeRef, target: int, replay: str) -> int:
    end, route = deliver(views, start, target, replay)
    expected = true_pred(views, target)
    assert end == expected, (
        f"delivered at {end.describe()}, pred(t) is {expected.describe()} "
        f"(t={target:#x}, {route.describe()}; {replay})"
    )
    assert is_responsible(views[end], target)
    return route.hops


def edge_targets(views: Views) -> list[int]:
    """Points where off-by-one and cycle-edge mistakes show."""
    points = {0, 1, HALF - 1, HALF, LABEL_SPACE - 1}
    for node in views:
        points.update({node.label, max(node.label - 1, 0), min(node.label + 1, LABEL_SPACE - 1)})
    return sorted(points)


# -- is_responsible --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 10, 100])
@pytest.mark.parametrize("seed", range(3))
def test_exactly_one_node_is_responsible(n: int, seed: int) -> None:
    views = random_ring(n, seed)
    rng = random.Random(seed)
    for target in edge_targets(views) + [rng.randrange(LABEL_SPACE) for _ in range(50)]:
        owners = [node for node, view in views.items() if is_responsible(view, target)]
        assert owners == [true_pred(views, target)], f"n={n} seed={seed} t={target:#x}"


def test_cycle_edge_ownership() -> None:
    views = random_ring(5, 0)
    order = ring_order(list(views))
    low, high = order[0], order[-1]
    assert is_responsible(views[high], low.label - 1), "below the minimum: the maximum owns it"
    assert is_responsible(views[high], LABEL_SPACE - 1)
    assert is_responsible(views[high], high.label)
    assert not is_responsible(views[high], low.label)
    assert is_responsible(views[low], low.label), "a node owns the point equal to its label"
    assert not is_responsible(views[high], high.label - 1)


def test_equal_labels_give_ownership_to_the_last_in_tie_order() -> None:
    # Hand-built views: two processes whose nodes share a label.
    a = NodeRef("a", Kind.MIDDLE, 100)
    b = NodeRef("b", Kind.MIDDLE, 100)
    low = NodeRef("c", Kind.LEFT, 10)
    high = NodeRef("d", Kind.RIGHT, HALF + 5)
    assert ring_order([b, high, a, low]) == [low, a, b, high]
    assert not is_responsible(View(me=a, pred=low, succ=b), 100)
    assert is_responsible(View(me=b, pred=a, succ=high), 100)
    assert not is_responsible(View(me=low, pred=high, succ=a), 100)
    assert is_responsible(View(me=low, pred=high, succ=a), 99)


# -- routes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_start_reaches_every_edge_target_on_tiny_rings(n: int) -> None:
    for seed in range(10):
        views = random_ring(n, seed)
        for start in views:
            for target in edge_targets(views):
                check_route(views, start, target, f"n={n} seed={seed} start={start}")


@pytest.mark.parametrize("n", [4, 7, 16, 50, 128, 300])
@pytest.mark.parametrize("seed", range(4))
def test_random_routes_reach_pred(n: int, seed: int) -> None:
    views = random_ring(n, seed)
    nodes = list(views)
    rng = random.Random(f"{n}-{seed}")
    targets = edge_targets(views)
    for _ in range(150):
        target = rng.choice(targets) if rng.random() < 0.3 else rng.randrange(LABEL_SPACE)
        start = rng.choice(nodes)
        check_route(views, start, target, f"n={n} seed={seed} start={start} t={target:#x}")


@pytest.mark.parametrize("n", [1, 8, 200])
def test_dht_keys_route_to_their_pred(n: int) -> None:
    views = random_ring(n, 99)
    nodes = list(views)
    for position in [1, 2, 3, 1000, POSITION_MAX]:
        key = position_key("default", position)
        assert 0 <= key < LABEL_SPACE
        for start in nodes[:: max(1, len(nodes) // 20)]:
            check_route(views, start, key, f"n={n} position={position} start={start}")


@settings(deadline=None, max_examples=120)
@given(
    n=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
    picks=st.lists(
        st.tuples(st.integers(0, 10**9), st.integers(0, LABEL_SPACE - 1)), min_size=1, max_size=8
    ),
)
def test_routes_reach_pred_on_any_ring(n: int, seed: int, picks: list[tuple[int, int]]) -> None:
    views = random_ring(n, seed)
    nodes = ring_order(list(views))
    replay = f"replay: random_ring(n={n}, seed={seed})"
    note(replay)
    print(replay)
    for start_pick, target in picks:
        start = nodes[start_pick % len(nodes)]
        check_route(views, start, target, f"{replay} start={start} t={target:#x}")


def test_mean_hops_stay_logarithmic_on_a_mid_sized_ring() -> None:
    # A guard against a correct but linear router; the calibration lives in tests/paper.
    views = random_ring(1000, 7)
    nodes = list(views)
    rng = random.Random(7)
    hops = [
        check_route(views, rng.choice(nodes), rng.randrange(LABEL_SPACE), "n=1000 seed=7")
        for _ in range(300)
    ]
    assert sum(hops) / len(hops) < 45


# -- route state -----------------------------------------------------------------------------


def test_start_at_the_owner_delivers_without_a_hop() -> None:
    views = random_ring(20, 3)
    for node, view in views.items():
        route = start_route(view, node.label)
        if is_responsible(view, node.label):
            assert next_hop(view, route) == (None, route)


def test_route_is_plain_data_for_the_wire() -> None:
    views = random_ring(30, 1)
    start = next(iter(views))
    route = start_route(views[start], 12345)
    hop, after = next_hop(views[start], route)
    assert hop is not None
    for state in (route, after):
        fields = dataclasses.asdict(state)
        assert all(type(value) is int or isinstance(value, Phase) for value in fields.values())
        wire = {k: int(v) for k, v in fields.items()}  # what msgpack hands back
        assert Route(**wire) == state
        assert state.describe().startswith("route ")


@pytest.mark.parametrize(
    "fields",
    [
        {"target": -1, "bits": 8},
        {"target": LABEL_SPACE, "bits": 8},
        {"target": 0, "bits": 65},
        {"target": 0, "bits": 8, "taken": 9},
        {"target": 0, "bits": 8, "point": LABEL_SPACE},
        {"target": 0, "bits": 8, "phase": 7},
        {"target": 0, "bits": 8, "heading": 2},
        {"target": 0, "bits": 8, "hops": -1},
    ],
)
def test_route_rejects_states_no_node_produces(fields: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        Route(**fields)
