"""The core's structure (issue 9): one owner per state machine, small modules that say
their job, no attrs (it imports threading), and errors split by blame.

A virtual node's state is a few plain parts (:mod:`skueue.core.parts`); the membership
protocol receives them and never imports the node, not even for type checking (grimp
counts those imports too).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import grimp
import pytest

import skueue.core.node.virtual_node as virtual_node
from skueue.core.batch import Batch
from skueue.core.errors import ProtocolError, RemoteProtocolError
from skueue.core.messages.stages import BatchUp
from skueue.core.ops import Op, OpKind, Structure
from skueue.core.process import Process
from skueue.overlay.labels import Kind
from skueue.sim.cluster import build_cluster, process_ids

CORE = Path(__file__).resolve().parents[2] / "skueue" / "core"
MODULE_LINES_MAX = 400


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("skueue", include_external_packages=True)


def imports_from(graph: grimp.ImportGraph, package: str, target: str) -> list[str]:
    return sorted(
        f"{m} -> {i}"
        for m in graph.find_descendants(package) | {package}
        for i in graph.find_modules_directly_imported_by(m)
        if i == target or i.startswith(target + ".")
    )


def test_membership_never_imports_the_node(graph: grimp.ImportGraph) -> None:
    assert imports_from(graph, "skueue.core.membership", "skueue.core.node") == []


def test_the_parts_import_neither_the_node_nor_the_membership_protocol(
    graph: grimp.ImportGraph,
) -> None:
    assert imports_from(graph, "skueue.core.parts", "skueue.core.node") == []
    assert imports_from(graph, "skueue.core.parts", "skueue.core.membership") == []


def test_the_pure_layers_do_not_use_attrs(graph: grimp.ImportGraph) -> None:
    for package in ("skueue.core", "skueue.overlay", "skueue.dht"):
        found = imports_from(graph, package, "attrs") + imports_from(graph, package, "attr")
        assert found == [], found


def core_modules() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_every_core_module_is_small_and_opens_with_its_job(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MODULE_LINES_MAX, f"{path.name} is over {MODULE_LINES_MAX}"
    assert ast.get_docstring(ast.parse(text)), f"{path.name} does not say what it is for"


# -- errors by blame ----------------------------------------------------------------------


def cluster(structure: Structure = Structure.QUEUE) -> dict[str, Process]:
    return build_cluster(process_ids(3), structure)


def test_misuse_by_the_driver_is_a_protocol_error_not_a_peer_error() -> None:
    processes = cluster()
    p = next(iter(processes.values()))
    other = next(q for q in processes.values() if q is not p)
    with pytest.raises(ProtocolError) as stack_op:
        p.submit(Op(0, OpKind.PUSH, "x", "no spaces"))  # the driver checks queue names
    with pytest.raises(ProtocolError) as elsewhere:
        p.handle(other.node_ref(Kind.LEFT), BatchUp(other.node_ref(Kind.MIDDLE), Batch(), 0))
    for e in (stack_op.value, elsewhere.value):
        assert not isinstance(e, RemoteProtocolError), e
    p.leave()
    with pytest.raises(ProtocolError) as leaving:
        p.submit(p.new_op(OpKind.ENQUEUE, "x"))
    assert not isinstance(leaving.value, RemoteProtocolError)


def test_a_refusal_after_the_check_passed_is_our_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a peer's message passed its check, the node may already have changed: a
    RemoteProtocolError from there on would blame the peer for our bug, so it comes out as a plain
    ProtocolError."""
    processes = cluster()
    p, q = list(processes.values())[:2]

    def passes(node: Any, message: Any) -> None:
        return None

    def refuses_late(self: Any, message: Any) -> Any:
        self.batching.hurried = True  # a change first
        raise RemoteProtocolError("refused after a change")

    monkeypatch.setattr(virtual_node, "check", passes)
    monkeypatch.setattr(virtual_node.VirtualNode, "_handle", refuses_late)
    with pytest.raises(ProtocolError) as raised:
        p.handle(p.node_ref(Kind.LEFT), BatchUp(q.node_ref(Kind.MIDDLE), Batch(), 0))
    assert not isinstance(raised.value, RemoteProtocolError)
    assert "refused after a change" in str(raised.value)
