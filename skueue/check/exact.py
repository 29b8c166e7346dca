"""Exact consistency check by search (Wing & Gong, with memoized states).

Theory of operation
-------------------
A history is sequentially consistent (linearizable) iff its operations can be
placed one at a time into a total order that a plain sequential queue/stack
accepts, taking each process's operations in ``seq`` order and, for
linearizability, never placing an operation while some unplaced operation
responded before it was invoked.

The search state is ``(how many ops of each process are placed, contents of
the abstract structure)``.  Which operations are placed is fully described by
the per-process counts, because placement follows program order; the
contents are needed as well because different orders of the same ops leave
the elements in different orders.  Two paths that reach the same state have
the same future, so a state is expanded at most once: revisiting a state can
only repeat a failure (success ends the search).  That memo is what turns the
naive ``n!`` into something usable for a few dozen operations; it is still
exponential in the worst case, hence the limits on ops and on visited states.

Real time is checked cheaply: the unplaced ops of a process are a suffix of
its list, so the earliest response among all unplaced ops is the minimum over
processes of a precomputed suffix minimum.

The memo alone is not enough: a violation deep in a history with several
processes makes the search try every interleaving of the ops before it.  So
each new state first goes through :class:`_Lookahead`, which derives
must-precede edges among the unplaced ops from the contents and the ordering
rules and drops the state on a cycle.  It is sound (never drops a state with
a completion) and in practice cuts failing searches from millions of states
to a few hundred.  The brute-force property test keeps both honest.

When no order exists, the reason names the deepest state reached: how far the
best prefix got, what the structure held, and either the contradiction the
lookahead found or why each process's next op could not go.  That is where
the search ran out of options, which is usually (not always) the operation
at fault.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Final

import attrs

from skueue.check.history import PEEK, Record
from skueue.check.patterns import Index

EXACT_OPS_MAX: Final = 100
"""Refuse longer histories: the search is exponential in the worst case."""
EXACT_STATES_MAX: Final = 200_000
"""Give up after visiting this many states (memory grows with every state)."""

State = tuple[tuple[int, ...], tuple[str, ...]]


class ExactLimitError(ValueError):
    """The history is too large for the exact search (ops or states over the limit)."""


def _contents(structure: str, contents: tuple[str, ...]) -> str:
    shown = ", ".join(contents) if len(contents) <= 8 else ", ".join(contents[:8]) + ", ..."
    if structure == "queue":
        return f"the queue holds [{shown}] (front first)"
    return f"the stack holds [{shown}] (bottom first)"


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class _Lookahead:
    """Proves a search state doomed by finding a contradiction among the unplaced ops.

    Nodes are the unplaced ops (bits of an int, by global index); an edge
    ``a -> b`` means every completion must place ``a`` before ``b``.  Edges:

    - program order, and (linearizability) real time;
    - ``ins(w) -> rem(w)`` for each element not inserted yet;
    - the current contents come out in structure order: front to back for a
      queue, top to bottom for a stack; and before any "empty".  A queue also
      gives up every current element before any element not inserted yet;
    - derived, repeated until nothing changes: if ``ins(w)`` reaches
      ``ins(x)`` then a queue needs ``rem(w) -> rem(x)``; if ``ins(w)``
      reaches an "empty", ``rem(w)`` precedes it; for a stack, if ``ins(w)``
      reaches ``rem(c)`` of a current element then ``rem(w) -> rem(c)``, and
      if ``ins(w)`` reaches ``ins(x)`` which reaches ``rem(w)`` then
      ``rem(x) -> rem(w)``.

    A cycle, or a required removal that does not exist, dooms the state.
    Every edge is forced, so pruning is sound; it is incomplete, the search
    does the rest.  Cost is ``O(n^2 / word)`` per state, small next to the
    states it saves.
    """

    def __init__(self, lanes: list[list[Record]], structure: str, realtime: bool) -> None:
        self.queue = structure == "queue"
        self.recs = [r for lane in lanes for r in lane]
        self.lane_ids: list[list[int]] = []
        g = 0
        for lane in lanes:
            self.lane_ids.append(list(range(g, g + len(lane))))
            g += len(lane)
        self.ins_of: dict[str, int] = {}
        self.rem_of: dict[str, int] = {}
        self.inserts = self.empties = 0
        for i, r in enumerate(self.recs):
            if r.inserts:
                assert r.value is not None
                self.ins_of[r.value] = i
                self.inserts |= 1 << i
            elif r.value is None:
                self.empties |= 1 << i
            else:
                self.rem_of[r.value] = i
        # rem_bit[i]: the removal of the element inserted by op i (0 if never removed).
        self.rem_bit = [0] * len(self.recs)
        for v, i in self.ins_of.items():
            j = self.rem_of.get(v)
            if j is not None:
                self.rem_bit[i] = 1 << j
        self.rt_after = [0] * len(self.recs)
        if realtime:
            for i, a in enumerate(self.recs):
                for j, b in enumerate(self.recs):
                    if a.response < b.invoke:
                        self.rt_after[i] |= 1 << j

    def doomed(self, counts: tuple[int, ...], contents: tuple[str, ...]) -> str | None:
        recs, queue = self.recs, self.queue
        pending: list[int] = []
        for p, ids in enumerate(self.lane_ids):
            pending.extend(ids[counts[p] :])
        if not pending:
            return None
        pmask = 0
        for i in pending:
            pmask |= 1 << i
        succ = dict.fromkeys(pending, 0)
        for p, ids in enumerate(self.lane_ids):
            for a, b in zip(ids[counts[p] :], ids[counts[p] + 1 :], strict=False):
                succ[a] |= 1 << b
        for i in pending:
            succ[i] |= self.rt_after[i] & pmask
        future = self.inserts & pmask
        empties = self.empties & pmask
        for i in _bits(future):
            succ[i] |= self.rem_bit[i]
        # The current contents, in the order they must come out.
        order = contents if queue else contents[::-1]
        chain: list[int] = []
        for k, c in enumerate(order):
            j = self.rem_of.get(c)
            if j is None:
                # Nothing behind a never-removed element can come out, and the
                # structure is never empty again; in a queue, nothing inserted
                # later can come out either.
                never = empties
                for d in order[k + 1 :]:
                    never |= 1 << self.rem_of[d] if d in self.rem_of else 0
                if queue:
                    for i in _bits(future):
                        never |= self.rem_bit[i]
                if never:
                    first = recs[next(_bits(never))].describe()
                    return f"{c} is never removed, so {first} can never go"
                break
            chain.append(j)
        content_rems = 0
        for a, b in zip(chain, chain[1:], strict=False):
            succ[a] |= 1 << b
        for j in chain:
            content_rems |= 1 << j
        if chain:
            succ[chain[-1]] |= empties
            if queue:
                for i in _bits(future):
                    succ[chain[-1]] |= self.rem_bit[i]
        while True:
            reach = self._closure(pending, succ)
            if isinstance(reach, str):
                return reach
            added = False
            for w in _bits(future):
                rw_bit, r = self.rem_bit[w], reach[w]
                need = r & empties
                if queue:
                    for x in _bits(r & future):
                        need |= self.rem_bit[x]
                else:
                    need |= r & content_rems
                if need and not rw_bit:
                    return (
                        f"{recs[w].describe()} is never removed, yet "
                        f"{recs[next(_bits(need))].describe()} needs it gone"
                    )
                if not rw_bit:
                    continue
                rw = rw_bit.bit_length() - 1
                if need & ~succ[rw]:
                    succ[rw] |= need
                    added = True
                if not queue:
                    for x in _bits(r & future):
                        if reach[x] & rw_bit:
                            rx_bit = self.rem_bit[x]
                            if not rx_bit:
                                return (
                                    f"{recs[x].describe()} is never removed, yet "
                                    f"{recs[rw].describe()} needs it gone"
                                )
                            rx = rx_bit.bit_length() - 1
                            if not succ[rx] & rw_bit:
                                succ[rx] |= rw_bit
                                added = True
            if not added:
                return None

    def _closure(self, pending: list[int], succ: dict[int, int]) -> dict[int, int] | str:
        """Reachability per node, or a description of a cycle."""
        reach: dict[int, int] = {}
        on_path: dict[int, int] = {}  # node -> position on the DFS path
        for root in pending:
            if root in reach:
                continue
            path = [root]
            on_path[root] = 0
            iters = [_bits(succ[root])]
            while iters:
                nxt = next(iters[-1], None)
                if nxt is None:
                    node = path.pop()
                    iters.pop()
                    del on_path[node]
                    acc = succ[node]
                    for j in _bits(acc):
                        acc |= reach[j]
                    reach[node] = acc
                    continue
                if nxt in reach:
                    continue
                if nxt in on_path:
                    cycle = path[on_path[nxt] :]
                    shown = " < ".join(self.recs[i].describe() for i in cycle[:4])
                    more = " < ..." if len(cycle) > 4 else ""
                    first = self.recs[cycle[0]].describe()
                    return f"the remaining ops would need {shown}{more} < {first}"
                on_path[nxt] = len(path)
                path.append(nxt)
                iters.append(_bits(succ[nxt]))
        return reach


def find_violation_exact(
    records: Sequence[Record],
    *,
    structure: str,
    realtime: bool,
    drained: bool,
    ops_max: int = EXACT_OPS_MAX,
    states_max: int = EXACT_STATES_MAX,
) -> str | None:
    """None if an admissible order exists, else why none does."""
    n = len(records)
    if n > ops_max:
        raise ExactLimitError(
            f"exact check refuses {n} ops (limit {ops_max}); use the certificate "
            "or patterns method, or raise ops_max knowing the search is exponential"
        )
    # Unique elements are a precondition of the model; their violations also
    # get clearer reasons here than from a stuck search.
    index = Index([r for r in records if r.op != PEEK])
    if index.problem is not None:
        return index.problem
    if drained:
        # Elements are unique, so a complete order ends empty iff every element
        # is removed: no search needed, and none could succeed.
        for v, r in index.ins.items():
            if v not in index.rem:
                return f"lost: {r.describe()} was never removed, but the run drained"
    if n == 0:
        return None
    queue = structure == "queue"
    by_proc: dict[str, list[Record]] = {}
    for r in records:
        by_proc.setdefault(r.process, []).append(r)
    lanes = [sorted(ops, key=lambda r: r.seq) for _, ops in sorted(by_proc.items())]
    lens = [len(lane) for lane in lanes]
    sufmin: list[list[float]] = []
    for lane in lanes:
        s = [math.inf] * (len(lane) + 1)
        for i in range(len(lane) - 1, -1, -1):
            s[i] = min(s[i + 1], lane[i].response)
        sufmin.append(s)
    nprocs = len(lanes)
    # A queue with priority levels: a removal takes the oldest element of the most urgent
    # level.  The lookahead's pruning reasons about FIFO and LIFO order only, so the
    # (small) search goes without it.
    level = {r.value: r.priority or 0 for r in records if r.inserts}
    prioritized = queue and any(level.values())
    # Nor does it know peeks, which remove nothing.
    plain = not prioritized and all(r.op != PEEK for r in records)
    lookahead = _Lookahead(lanes, structure, realtime) if plain else _NoLookahead()

    def successors(state: State) -> Iterator[tuple[Record, State]]:
        counts, contents = state
        bound = min(sufmin[p][counts[p]] for p in range(nprocs)) if realtime else math.inf
        cands = [
            (lanes[p][counts[p]], p)
            for p in range(nprocs)
            if counts[p] < lens[p] and lanes[p][counts[p]].invoke <= bound
        ]
        # Earliest invocation first: on legal histories this tends to follow
        # the real order, so the first dive usually succeeds.
        cands.sort(key=lambda c: c[0].invoke)
        for r, p in cands:
            v = r.value
            if r.inserts:
                assert v is not None
                nxt = contents + (v,)
            elif r.op == PEEK:  # the head a removal would take, left where it is
                if v is None and contents:
                    continue
                if v is not None and _head(contents, level, prioritized) != v:
                    continue
                nxt = contents
            elif v is None:
                if contents:
                    continue
                nxt = contents
            elif prioritized:
                if _head(contents, level, prioritized) != v:
                    continue
                nxt = tuple(x for x in contents if x != v)
            elif queue:
                if not contents or contents[0] != v:
                    continue
                nxt = contents[1:]
            else:
                if not contents or contents[-1] != v:
                    continue
                nxt = contents[:-1]
            yield r, (counts[:p] + (counts[p] + 1,) + counts[p + 1 :], nxt)

    start: State = ((0,) * nprocs, ())
    best = _Best(0, start, [], lookahead.doomed(*start))
    if best.doom is not None:
        return best.explain(n, lanes, structure, realtime)
    visited = {start}
    path: list[Record] = []
    stack = [successors(start)]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            if path:
                path.pop()
            continue
        r, state = step
        if state in visited:
            continue
        visited.add(state)
        if len(visited) > states_max:
            raise ExactLimitError(
                f"exact check gave up after {states_max} states on {n} ops; "
                "use the certificate or patterns method"
            )
        path.append(r)
        doom = lookahead.doomed(*state)
        if len(path) > best.depth:
            best = _Best(len(path), state, list(path), doom)
        if doom is not None:
            path.pop()
            continue
        if len(path) == n:
            if not drained or not state[1]:
                return None
            path.pop()
            continue
        stack.append(successors(state))
    return best.explain(n, lanes, structure, realtime)


def _head(contents: tuple[str, ...], level: dict[str | None, int], prioritized: bool) -> str | None:
    """What a queue's removal takes from ``contents`` (oldest first): the oldest element
    of the most urgent level, or None when empty."""
    if not contents:
        return None
    if not prioritized:
        return contents[0]
    urgent = min(level[x] for x in contents)
    return next(x for x in contents if level[x] == urgent)


class _NoLookahead:
    def doomed(self, counts: tuple[int, ...], contents: tuple[str, ...]) -> str | None:
        return None


@attrs.frozen
class _Best:
    """The deepest state the search reached: where it ran out of options."""

    depth: int
    state: State
    path: list[Record]
    doom: str | None

    def explain(self, n: int, lanes: list[list[Record]], structure: str, realtime: bool) -> str:
        model = "linearizable" if realtime else "sequentially consistent"
        counts, contents = self.state
        if self.depth == 0:
            if self.doom is not None:
                return f"no {model} order: {self.doom}"
            head = f"no {model} order: no op can go first"
        else:
            tail = ", ".join(r.describe() for r in self.path[-3:])
            more = "..., " if self.depth > 3 else ""
            head = (
                f"no {model} order: the longest admissible prefix places {self.depth} of {n} "
                f"ops ({more}{tail}); then {_contents(structure, contents)}"
            )
        if self.depth == n:
            return f"{head} at the end of a drained run"
        if self.doom is not None:
            return f"{head}, and {self.doom}"
        blocked: list[str] = []
        pending = [lanes[p][counts[p]] for p in range(len(lanes)) if counts[p] < len(lanes[p])]
        unplaced = [lane[i] for p, lane in enumerate(lanes) for i in range(counts[p], len(lane))]
        first_done = min(unplaced, key=lambda r: r.response)
        for r in pending:
            if realtime and first_done.response < r.invoke:
                blocked.append(f"{r.describe()} must wait for {first_done.describe()} (real time)")
            elif r.inserts:
                # Unreachable in practice: an insert that may go always leads deeper.
                blocked.append(f"{r.describe()} leads nowhere")
            elif r.value is None:
                blocked.append(f"{r.describe()} needs it empty")
            else:
                where = "front" if structure == "queue" else "top"
                blocked.append(f"{r.describe()} needs {r.value} at the {where}")
        sep = ": " if self.depth == 0 else ", and "
        return head + sep + "; ".join(blocked)
