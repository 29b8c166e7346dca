"""Paper Theorem 17: an update phase takes O(log n) rounds, for joins and for leaves."""

from __future__ import annotations

import pytest

from skueue.sim.update_rounds import measure_update_phase


@pytest.mark.parametrize(("joins", "leaves"), [(1, 0), (0, 1), (3, 3)])
def test_theorem17_update_phase_rounds_grow_with_the_tree_not_with_n(
    joins: int, leaves: int
) -> None:
    """The phase is a constant number of round trips of the old tree (three stages) plus
    constant neighbour work: its rounds stay within a constant factor of the tree height,
    while n grows 16-fold, and they grow by a bounded amount per doubling of n.

    Reference: §V, Theorem 17
    """
    timings = [measure_update_phase(n, joins, leaves, seed=1) for n in (4, 16, 64)]
    for t in timings:
        # Joins and leaves counted in different batches may take two phases.
        assert 1 <= t.phases <= 2, t
        assert t.phase_rounds <= t.phases * (8 * t.tree_height_after + 20), t
    rounds = [t.phase_rounds / t.phases for t in timings]
    assert rounds[0] < rounds[1] < rounds[2], rounds
    # 16 times the processes: four doublings, each adding a bounded number of rounds.
    assert (rounds[2] - rounds[0]) / 4 < 60, rounds
