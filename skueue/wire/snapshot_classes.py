"""The classes a snapshot may hold, for :mod:`skueue.wire.snapshot_codec`: the allowlist
its decoder builds objects from, derived once, at import, from the host's own classes.

What is in it
-------------
- every dataclass and every enum *defined* in a module of ``skueue.core``,
  ``skueue.host``, ``skueue.overlay`` and ``skueue.dht`` (the pure layers: a host's
  state is made of nothing else), except exceptions and abstract classes; the paged
  storage engine's modules are not walked (its store holds files and maps, and a
  snapshot names it instead: ``persistent`` in the codec);
- the plain classes a host holds, each with the attributes it is rebuilt from
  (:data:`PLAIN_ATTRIBUTES`): written here for those that keep them in a ``__dict__``,
  their ``__slots__`` for the others.

A class travels by its name (unique among these: a second class of the same name stops
the import), so the sender never names a module to import or a callable to call.

Each dataclass field comes with a shallow check of its annotation (:func:`checker`):
an ``int`` field takes an int, a ``list[...]`` field a list, a ``Node | None`` field a
Node or None; what is inside a generic is not checked (each element is checked as a
field of its own object when it is one).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import importlib
import inspect
import pkgutil
import types
import typing
from collections.abc import Callable
from typing import Any

import skueue.core
import skueue.dht
import skueue.host
import skueue.overlay
from skueue.dht.intmap import IntMap
from skueue.dht.storage.memory import MemoryEntryStore
from skueue.host.clients import Clients
from skueue.host.directory import Directory
from skueue.host.host import Host

PACKAGES = (skueue.core, skueue.host, skueue.overlay, skueue.dht)
NOT_WALKED = ("skueue.dht.storage.paged",)  # module name prefixes (the docstring says why)

# The plain classes' attributes, as their __init__ sets them: a snapshot holds exactly
# these (the encoder refuses an object with another attribute, so a class that grows one
# fails the round-trip tests until it is listed here).
PLAIN_ATTRIBUTES: dict[type, tuple[str, ...]] = {
    Host: (
        "clients", "directory", "storage", "handover_bytes_max", "join_waiters",
        "leave_waiters", "joined", "left", "client_ids_max",
    ),
    Clients: (
        "process", "structure", "ops", "out", "running", "counters", "gone_clients",
        "pending_requests", "deadlines", "arrivals", "inherited", "inherited_from",
        "retry_window", "queue_stats", "waits", "wait_ends", "retry_running",
        "orphan_leases", "hints", "looks",
    ),
    Directory: ("own_id", "addresses", "departed", "contacts", "refused", "removed"),
    IntMap: IntMap.__slots__,
    MemoryEntryStore: MemoryEntryStore.__slots__,
}  # fmt: skip

Check = Callable[[Any], bool] | None
"""A field's check: true when a value fits its annotation (None: anything fits)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ClassSpec:
    """How one allowed class travels: its fields in order and how each is checked, or
    an enum's members."""

    name: str
    cls: type
    fields: tuple[str, ...]
    checks: tuple[Check, ...]
    wants: tuple[str, ...]  # each field's annotation, for the error message
    is_enum: bool = False
    members: dict[Any, Any] = dataclasses.field(default_factory=dict)  # an enum's, by value


def _walked_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.startswith(NOT_WALKED):
                names.append(info.name)
    return names


def _allowed(cls: type) -> bool:
    if issubclass(cls, enum.Enum):
        return cls is not enum.Enum and bool(cls.__members__)
    return (
        dataclasses.is_dataclass(cls)
        and not issubclass(cls, BaseException)
        and not inspect.isabstract(cls)
        and not getattr(cls, "_is_protocol", False)
    )


def _types_of(annotation: Any) -> tuple[type, ...] | None:
    """The classes a value of ``annotation`` may be an instance of (None: unchecked)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation is Any or isinstance(annotation, typing.TypeVar):
        return None
    if annotation is None or annotation is type(None):
        return (type(None),)
    if isinstance(annotation, typing.NewType):
        return _types_of(annotation.__supertype__)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        found: list[type] = []
        for arg in typing.get_args(annotation):
            inner = _types_of(arg)
            if inner is None:
                return None
            found += inner
        return tuple(found)
    if origin is typing.Literal:
        return tuple({type(v) for v in typing.get_args(annotation)})
    if origin is typing.Final or origin is typing.ClassVar:
        return _types_of(typing.get_args(annotation)[0])
    if origin is not None:
        annotation = origin
    if annotation is float:
        return (float, int)  # the numeric tower: an int is a float here
    if not isinstance(annotation, type):
        return None  # a form this check does not know: left unchecked
    if getattr(annotation, "_is_protocol", False) and not getattr(
        annotation, "_is_runtime_protocol", False
    ):
        return None  # isinstance cannot tell (an EntryStore, say)
    if annotation is collections.abc.Callable:
        return None  # a snapshot never holds a callable; nothing to check it against
    return (annotation,)


def checker(annotation: Any) -> Check:
    """The shallow check of a field annotated ``annotation`` (module docstring)."""
    allowed = _types_of(annotation)
    if allowed is None:
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        values = typing.get_args(annotation)
        return lambda x: any(type(x) is type(v) and x == v for v in values)
    return lambda x: isinstance(x, allowed)


def _dataclass_spec(cls: type) -> ClassSpec:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = tuple(f.name for f in dataclasses.fields(cls))
    return ClassSpec(
        cls.__name__,
        cls,
        fields,
        tuple(checker(hints.get(name, Any)) for name in fields),
        tuple(str(hints.get(name, Any)) for name in fields),
    )


def _plain_spec(cls: type, attributes: tuple[str, ...]) -> ClassSpec:
    return ClassSpec(
        cls.__name__,
        cls,
        tuple(attributes),
        (None,) * len(attributes),
        ("any",) * len(attributes),
    )


def _registry() -> dict[str, ClassSpec]:
    specs: dict[str, ClassSpec] = {}

    def add(spec: ClassSpec) -> None:
        other = specs.get(spec.name)
        if other is not None and other.cls is not spec.cls:
            raise ImportError(
                f"two snapshot classes are named {spec.name}: {other.cls.__module__} and "
                f"{spec.cls.__module__}; rename one (a class travels by its name)"
            )
        specs[spec.name] = spec

    for module_name in _walked_modules():
        module = importlib.import_module(module_name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module_name or not _allowed(cls):
                continue
            if issubclass(cls, enum.Enum):
                members = {m.value: m for m in cls}
                add(ClassSpec(cls.__name__, cls, (), (), (), is_enum=True, members=members))
            else:
                add(_dataclass_spec(cls))
    for cls, attributes in PLAIN_ATTRIBUTES.items():
        add(_plain_spec(cls, attributes))
    return specs


CLASSES: dict[str, ClassSpec] = _registry()
"""The allowlist: every class a snapshot may hold, by the name it travels under."""
BY_CLASS: dict[type, ClassSpec] = {spec.cls: spec for spec in CLASSES.values()}
