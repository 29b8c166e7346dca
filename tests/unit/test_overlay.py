"""Labels, local views and the aggregation tree on random static rings (SPEC §2-§3)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skueue.overlay import tree
from skueue.overlay.labels import (
    HALF,
    LABEL_SPACE,
    Kind,
    NodeRef,
    label_for,
    left_label,
    middle_label,
    node_ref,
    process_nodes,
    right_label,
    ring_order,
)
from skueue.overlay.ring import build_views, ring_nodes
from skueue.overlay.view import View

SIZES = [1, 2, 3, 5, 16, 100, 300]
SEEDS = range(5)


def random_ids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"p{rng.getrandbits(64):016x}" for _ in range(n)]


def random_ring(n: int, seed: int) -> dict[NodeRef, View]:
    return build_views(random_ids(n, seed))


# -- labels -------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [0, 1, 2, HALF - 1, HALF, HALF + 1, LABEL_SPACE - 2, LABEL_SPACE - 1])
def test_left_and_right_labels_halve_the_middle(m: int) -> None:
    assert left_label(m) == m // 2
    assert right_label(m) == (m + LABEL_SPACE) // 2
    assert 0 <= left_label(m) < HALF <= right_label(m) < LABEL_SPACE


@given(st.text(max_size=40))
def test_process_labels_are_in_their_halves(process_id: str) -> None:
    left, middle, right = process_nodes(process_id)
    m = middle_label(process_id)
    assert 0 <= m < LABEL_SPACE
    assert (left.kind, middle.kind, right.kind) == (Kind.LEFT, Kind.MIDDLE, Kind.RIGHT)
    assert 0 <= left.label < HALF, "left labels lie in [0, 1/2)"
    assert HALF <= right.label < LABEL_SPACE, "right labels lie in [1/2, 1)"
    assert (left.label, middle.label, right.label) == (m >> 1, m, (m + LABEL_SPACE) >> 1)
    for node in (left, middle, right):
        assert node_ref(process_id, node.kind) == node
        assert label_for(m, node.kind) == node.label
        for kind in Kind:
            assert node.sibling(kind) == node_ref(process_id, kind)


def test_middle_label_is_a_stable_public_hash() -> None:
    # Every host must compute the same label for an id: pin one value (mmh3 x64, seed 0).
    assert middle_label("p1") == 0x82A4E7B7160AF7EB
    assert middle_label("p1") != middle_label("p2")


def test_ties_break_by_process_id_then_kind() -> None:
    label = 12345
    a_right = NodeRef("a", Kind.RIGHT, label)
    b_left = NodeRef("b", Kind.LEFT, label)
    b_middle = NodeRef("b", Kind.MIDDLE, label)
    lower = NodeRef("z", Kind.RIGHT, label - 1)
    higher = NodeRef("a", Kind.LEFT, label + 1)
    shuffled = [b_middle, higher, b_left, a_right, lower]
    assert ring_order(shuffled) == [lower, a_right, b_left, b_middle, higher]


@given(st.lists(st.integers(0, LABEL_SPACE - 1), min_size=1, max_size=30))
def test_minimum_is_a_left_node_and_maximum_a_right_node(middles: list[int]) -> None:
    # Routing relies on this: the neighbours across the cycle edge are never middle nodes.
    nodes = [
        NodeRef(f"p{i}", kind, label_for(m, kind)) for i, m in enumerate(middles) for kind in Kind
    ]
    order = ring_order(nodes)
    assert order[0].kind is Kind.LEFT
    assert order[-1].kind is Kind.RIGHT


# -- views ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_views_link_the_sorted_cycle(n: int, seed: int) -> None:
    views = random_ring(n, seed)
    order = ring_nodes(random_ids(n, seed))
    assert len(views) == len(order) == 3 * n
    for i, node in enumerate(order):
        view = views[node]
        assert view.me == node
        assert view.pred == order[i - 1]
        assert view.succ == order[(i + 1) % len(order)]
        assert view.pred_across_cycle == (i == 0)
        assert view.succ_across_cycle == (i == len(order) - 1)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_anchor_is_exactly_the_minimum_node(n: int, seed: int) -> None:
    views = random_ring(n, seed)
    minimum = min(views, key=lambda node: node.key)
    anchors = [node for node, view in views.items() if view.is_anchor]
    assert anchors == [minimum], f"n={n} seed={seed}"
    assert minimum.kind is Kind.LEFT


# -- aggregation tree -----------------------------------------------------------------------


def expected_parent(view: View) -> NodeRef | None:
    """SPEC §3's table, written out independently of overlay.tree."""
    if view.me.kind is Kind.LEFT:
        return None if view.is_anchor else view.pred
    if view.me.kind is Kind.MIDDLE:
        return view.me.sibling(Kind.LEFT)
    return view.me.sibling(Kind.MIDDLE)


def expected_children(view: View) -> tuple[NodeRef, ...]:
    succ_is_left_child = view.succ.kind is Kind.LEFT and not view.succ_across_cycle
    if view.me.kind is Kind.RIGHT:
        # A right node's successor is a left node only across the cycle edge.
        assert not succ_is_left_child
        return ()
    own = view.me.sibling(Kind.MIDDLE if view.me.kind is Kind.LEFT else Kind.RIGHT)
    return (own, view.succ) if succ_is_left_child else (own,)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_tree_matches_the_table(n: int, seed: int) -> None:
    for node, view in random_ring(n, seed).items():
        assert tree.parent(view) == expected_parent(view), f"n={n} seed={seed} {view.describe()}"
        assert tree.children(view) == expected_children(view), f"n={n} seed={seed} {node}"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_children_and_parent_agree(n: int, seed: int) -> None:
    views = random_ring(n, seed)
    parents = {node: tree.parent(view) for node, view in views.items()}
    for node, view in views.items():
        kids = tree.children(view)
        assert len(set(kids)) == len(kids)
        assert set(kids) == {c for c, p in parents.items() if p == node}, f"n={n} seed={seed}"
        for child in kids:
            assert child in views, "a child is a real node of the ring"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_child_order_puts_the_own_sibling_first(n: int, seed: int) -> None:
    for view in random_ring(n, seed).values():
        kids = tree.children(view)
        if view.me.kind is Kind.RIGHT:
            assert kids == ()
            continue
        assert kids[0].process == view.me.process
        assert kids[0].kind == view.me.kind + 1
        assert all(kid.process != view.me.process for kid in kids[1:])
        assert tree.children(view) == kids, "the order is a function of the view"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", SEEDS)
def test_every_node_reaches_the_anchor(n: int, seed: int) -> None:
    views = random_ring(n, seed)
    (anchor,) = [node for node, view in views.items() if view.is_anchor]
    for node in views:
        seen = {node}
        up: NodeRef | None = node
        last = node
        while up is not None:
            last = up
            up = tree.parent(views[up])
            assert up not in seen, f"parent cycle through {up} (n={n} seed={seed})"
            if up is not None:
                seen.add(up)
                # Parents sit strictly lower on the cycle, which is why there are no cycles.
                assert up.key < last.key
        assert last == anchor


@settings(deadline=None, max_examples=50)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True))
def test_tree_is_one_tree_for_any_ids(process_ids: list[str]) -> None:
    views = build_views(process_ids)
    roots = [node for node, view in views.items() if tree.parent(view) is None]
    assert len(roots) == 1 and views[roots[0]].is_anchor
    edges = sum(len(tree.children(view)) for view in views.values())
    assert edges == len(views) - 1, "a spanning tree has one edge fewer than nodes"
