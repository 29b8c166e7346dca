"""Comparing a host's or a process's state with another's: as (path, leaf) lines in a
deterministic order (pickle bytes are not stable: a set unpickled may iterate in another
order than the original, and the memo of shared strings differs).  The simulators use it
to check that a crashed member rebuilt from its record equals the one lost; the daemon,
to check that a follower replica applied its group's log to the leader's state
(runtime/applied_state.py)."""

from __future__ import annotations

import dataclasses
import enum
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any


class DeterminismError(AssertionError):
    """The replay of a member's logged inputs did not give back what the first run did:
    a bug in the host or the core (or in the model of recovery), never the schedule's."""


_LEAVES = (type(None), bool, int, float, str, bytes, enum.Enum)


LeaveOut = Callable[[str, object], bool]


def state_lines(
    obj: object, skip: tuple[str, ...] = (), leave_out: LeaveOut | None = None
) -> list[tuple[str, Any]]:
    """A process's state as (path, leaf) lines, in a deterministic order: every field of
    every dataclass (also those compared by identity, like a LeaveTicket), dicts and
    lists in their order (which the core may iterate), sets as sets, and an object
    reached again through another path as a reference to the first path, so that two
    states are equal only if they also share the same objects (the three nodes of a
    process share their join and leave tickets).  Paths that start with one of ``skip``
    are left out (a host's timers: the driver's clock, not its record), and so are the
    objects for which ``leave_out(path, obj)`` is true (those a path cannot name: they
    are reached through several)."""
    out: list[tuple[str, Any]] = []
    _walk(obj, "", out, {}, skip, leave_out)
    return out


def _walk(
    obj: object, path: str, out: list[tuple[str, Any]], seen: dict[int, str],
    skip: tuple[str, ...] = (), leave_out: LeaveOut | None = None,
) -> None:
    if skip and path.startswith(skip):
        return  # left out, and what it holds is first seen elsewhere
    if leave_out is not None and leave_out(path, obj):
        return
    if isinstance(obj, _LEAVES):
        out.append((path, obj))
        return
    mutable = not isinstance(obj, tuple | frozenset) and not _frozen_dataclass(obj)
    if mutable:
        first = seen.get(id(obj))
        if first is not None:
            out.append((path, ("same as", first)))
            return
        seen[id(obj)] = path
    name = type(obj).__name__
    if isinstance(obj, set | frozenset):
        items = frozenset(tuple(state_lines(e)) for e in obj)
        out.append((path, (name, items)))
    elif isinstance(obj, dict):
        out.append((path, (name, len(obj))))
        for i, (key, value) in enumerate(obj.items()):
            _walk(key, f"{path}{{{i}}}", out, seen, skip, leave_out)
            _walk(value, f"{path}[{key!r}]", out, seen, skip, leave_out)
    elif isinstance(obj, list | tuple | deque):
        out.append((path, (name, len(obj))))
        for i, value in enumerate(obj):
            _walk(value, f"{path}[{i}]", out, seen, skip, leave_out)
    elif isinstance(obj, array):
        out.append((path, (name, obj.typecode, obj.tobytes())))
    elif dataclasses.is_dataclass(obj):
        out.append((path, name))
        for f in dataclasses.fields(obj):
            _walk(getattr(obj, f.name), f"{path}.{f.name}", out, seen, skip, leave_out)
    else:
        attrs = _attributes(obj)
        if attrs is None:
            raise TypeError(f"state_lines: cannot compare {name} at {path or 'the top'}")
        out.append((path, name))
        for attr, value in attrs:
            _walk(value, f"{path}.{attr}", out, seen, skip, leave_out)


def _frozen_dataclass(obj: object) -> bool:
    params = getattr(type(obj), "__dataclass_params__", None)
    return params is not None and params.frozen


def _attributes(obj: object) -> list[tuple[str, Any]] | None:
    """A plain object's attributes: its slots (IntMap) or its __dict__."""
    names = []
    for cls in type(obj).__mro__:
        slots = getattr(cls, "__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    names = [n for n in names if n not in ("__dict__", "__weakref__")]
    if not names and not hasattr(obj, "__dict__"):
        return None
    attrs = [(n, getattr(obj, n)) for n in names if hasattr(obj, n)]
    attrs += sorted(getattr(obj, "__dict__", {}).items())
    return attrs
