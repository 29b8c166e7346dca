"""The README's Python examples run as written (issue 12, "Done means"): each code block
is taken from the README, pointed at a real cluster, and run.  The consumer's gets a
``handle`` that fails on one element: the good elements are each handled once and acked;
the bad one is nacked until its delivery limit sends it to the dead letters.  In the
others, a line whose comment starts with a value (``b"..."``, ``True``, a number) must
return exactly that (issue 28 item 5: the named-queue example raised RequestRejected).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

import skueue
import skueue.client.api
from tests.e2e.daemons import Cluster

StartCluster = Callable[..., Cluster]
README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE_TIMEOUT_S = 60.0


def example(after: str) -> str:
    """The first ```python block after the line that starts with ``after``."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\n", text.index(after)) + len("```python\n")
    return text[start : text.index("```", start)]


@pytest.mark.trio
async def test_the_consumer_example_runs_as_written(skueued_cluster: StartCluster) -> None:
    cluster = skueued_cluster(2, "queue")
    code = example("**Leases and the consumer**")
    assert "127.0.0.1:7400" in code and "q.consume(" in code
    code = code.replace("127.0.0.1:7400", cluster.addresses[0])
    async with skueue.client.api.connect(cluster.addresses[1]) as q:
        await q.enqueue_many([b"first", *(f"job-{i}".encode() for i in range(20)), b"bad"],
                             queue="jobs")  # fmt: skip
    handled: list[bytes] = []

    def handle(value: bytes) -> None:
        if value == b"bad":
            raise ValueError("this one always fails")
        handled.append(value)

    scope: dict[str, object] = {"skueue": skueue, "handle": handle}
    exec(compile("async def run():\n" + textwrap.indent(code, "    "), "README", "exec"), scope)
    with trio.fail_after(EXAMPLE_TIMEOUT_S):
        await scope["run"]()  # type: ignore[operator]
    # The example's own dequeue took "first" and acked it; the consumer took the rest.
    assert sorted(handled) == sorted(f"job-{i}".encode() for i in range(20))
    async with skueue.client.api.connect(cluster.addresses[1]) as q:
        assert await q.dequeue(queue="jobs") is None
        assert await q.dequeue(queue="jobs.dlq") == b"bad"


def test_the_priority_and_peek_example_runs_and_returns_what_it_says(
    skueued_cluster: StartCluster,
) -> None:
    """The Python API section's priority and peek lines, run against a real cluster; a
    line whose comment starts with a bytes literal must return exactly that."""
    cluster = skueued_cluster(2, "queue")
    marker = "# priority levels and peek"
    lines = example("### The Python API").splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    code = []
    for line in lines[start:]:
        line = line.replace("127.0.0.1:7400", cluster.addresses[1])
        statement, _, comment = line.partition("  # ")
        said = comment.split(",")[0].strip()
        if said.startswith('b"'):
            indent = statement[: len(statement) - len(statement.lstrip())]
            code += [f"{indent}_ = {statement.strip()}", f"{indent}assert _ == {said}, _"]
        else:
            code.append(statement)
    assert sum("assert" in line for line in code) == 2, code
    exec(compile("\n".join(code), "README", "exec"), {"skueue": skueue})


# A comment that starts with a Python value says what its line returns.
SAID = re.compile(r'(b"[^"]*"|True|False|-?\d+)(?=[:,\s]|$)')


def checked(lines: list[str], address: str) -> list[str]:
    """``lines`` with the README's address replaced, and each line whose comment says
    what it returns turned into an assertion of that."""
    code = []
    for line in lines:
        statement, _, comment = line.replace("127.0.0.1:7400", address).partition("  # ")
        said = SAID.match(comment.strip())
        if said and statement.strip():
            indent = statement[: len(statement) - len(statement.lstrip())]
            value = said.group(1)
            code += [f"{indent}_ = {statement.strip()}", f"{indent}assert _ == {value}, _"]
        else:
            code.append(statement)
    return code


def test_the_named_queues_example_runs_and_returns_what_it_says(
    skueued_cluster: StartCluster,
) -> None:
    """Its create came after an enqueue had made the queue without a limit, and failed;
    it now makes the queue first, works on a stack by its name alone, and changes the
    delivery limit in place."""
    cluster = skueued_cluster(2, "queue")
    lines = example("### The Python API").splitlines()
    start = next(i for i, line in enumerate(lines) if "# named queues and stacks" in line)
    end = next(i for i, line in enumerate(lines) if "# priority levels and peek" in line)
    code = checked(lines[start:end], cluster.addresses[0])
    asserted = [line for line in code if "assert" in line]
    assert len(asserted) == 5, code
    assert any("configure_queue" in line for line in code), "the example shows configure"
    exec(compile("\n".join(code), "README", "exec"), {"skueue": skueue})
    with skueue.connect_blocking(cluster.addresses[1]) as q:
        jobs = q.stats()["queues"]["jobs"]
        assert (jobs["structure"], jobs["max_deliveries"]) == ("queue", 3)
