"""Where each process's replication group lives (docs/replication.md §5.7).

Hosts are ordered by their process's middle label ``h(id)``, the order of the paper's
Linearized De Bruijn network (ties, which a 64-bit hash all but never makes, by id).
The voters of process P's group are P's own host and the next ``k − 1`` hosts after it
in that order, around the ring: every member computes the same groups from the member
list, with no one to ask, as etcd's ``initial-cluster``.  So each host is a voter of its
own group and of the groups of the ``k − 1`` processes before it.
"""

from __future__ import annotations

from collections.abc import Iterable

from skueue.overlay.labels import middle_label


def ring_order(members: Iterable[str]) -> list[str]:
    """The members in the order of their middle labels."""
    return sorted(set(members), key=lambda m: (middle_label(m), m))


def voters_of(process: str, members: Iterable[str], replicas: int) -> tuple[str, ...]:
    """The voters of ``process``'s group, its own host first: ``replicas`` of them, or
    every member where there are fewer."""
    order = ring_order(members)
    if process not in order:
        raise ValueError(f"{process!r} is not a member")
    at, n = order.index(process), len(order)
    return tuple(order[(at + j) % n] for j in range(min(replicas, n)))


def groups_followed_by(host: str, members: Iterable[str], replicas: int) -> list[str]:
    """The processes whose groups ``host`` is a voter of, besides its own: the
    ``replicas − 1`` before it in ring order."""
    order = ring_order(members)
    return [p for p in order if p != host and host in voters_of(p, order, replicas)]
