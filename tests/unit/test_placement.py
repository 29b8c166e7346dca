"""The placement rule (skueue/host/placement.py; docs/replication.md §5.7)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from skueue.host.placement import groups_followed_by, ring_order, voters_of
from skueue.overlay.labels import middle_label

members_st = st.lists(st.text("abcdefgh:0123456789.", min_size=1, max_size=12),
                      min_size=1, max_size=12, unique=True)  # fmt: skip


@given(members_st, st.sampled_from([1, 3, 5]))
def test_every_host_carries_as_many_groups_as_replicas(members: list[str], k: int) -> None:
    voters = {p: voters_of(p, members, k) for p in members}
    size = min(k, len(members))
    for p, vs in voters.items():
        assert vs[0] == p and len(set(vs)) == len(vs) == size
    # The load is even: each host votes in exactly `size` groups, its own among them.
    load = Counter(h for vs in voters.values() for h in vs)
    assert set(load.values()) == {size}
    for h in members:
        followed = groups_followed_by(h, members, k)
        assert h not in followed and len(followed) == size - 1
        assert all(h in voters[p] for p in followed)


@given(members_st, st.sampled_from([3, 5]), st.randoms())
def test_every_member_computes_the_same_groups(members: list[str], k: int, rnd: object) -> None:
    shuffled = list(members)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert [voters_of(p, shuffled, k) for p in members] == [voters_of(p, members, k)
                                                             for p in members]  # fmt: skip


def test_the_next_hosts_in_label_order_around_the_ring() -> None:
    members = [f"127.0.0.1:{7400 + i}" for i in range(5)]
    order = ring_order(members)
    assert [middle_label(m) for m in order] == sorted(middle_label(m) for m in members)
    assert voters_of(order[3], members, 3) == (order[3], order[4], order[0])
    assert groups_followed_by(order[0], members, 3) == [order[3], order[4]]
