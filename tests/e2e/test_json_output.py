"""``--json`` for what redis-cli users look for (issue 28, "what redis-cli and nats
users look for"): ``enqueue --json`` says where each element went and the queue's size
after (as LPUSH answers the new length), and ``dequeue``, ``peek`` and ``consume``
print the same fields for an element, its position among them, so an element can be
followed from its enqueue to its dequeue."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from skueue.cli.json_records import queue_size
from skueue.client.errors import NodeUnreachable
from tests.e2e.daemons import Cluster
from tests.e2e.test_cli import skueue

StartCluster = Callable[..., Cluster]
ELEMENT_FIELDS = {"base64", "text", "position"}


def json_lines(*args: str, code: int = 0) -> list[dict[str, Any]]:
    out = skueue(*args)
    assert out.returncode == code, out.stderr
    return [json.loads(line) for line in out.stdout.decode().splitlines()]


def test_enqueue_json_gives_each_position_and_the_size_and_the_others_follow_them(
    skueued_cluster: StartCluster,
) -> None:
    node = ["--node", skueued_cluster(2).addresses[0]]
    (first,) = json_lines("enqueue", "-q", "jobs", "a", "b", "c", "--json", *node)
    assert first["queue"] == "jobs" and first["size"] == 3
    positions = first["positions"]
    assert len(positions) == 3 and positions == list(range(positions[0], positions[0] + 3))
    (second,) = json_lines("enqueue", "-q", "jobs", "d", "--json", *node)
    assert second == {"queue": "jobs", "positions": [positions[-1] + 1], "size": 4}
    positions += second["positions"]

    (peeked,) = json_lines("peek", "-q", "jobs", "--json", *node)
    assert set(peeked) == ELEMENT_FIELDS
    assert (peeked["text"], peeked["position"]) == ("a", positions[0])

    got = json_lines("dequeue", "-q", "jobs", "-n", "2", "--json", *node)
    assert [set(g) for g in got] == [ELEMENT_FIELDS] * 2
    assert [(g["text"], g["position"]) for g in got] == [("a", positions[0]), ("b", positions[1])]
    assert base64.b64decode(got[1]["base64"]) == b"b"

    (consumed,) = json_lines("consume", "jobs", "-n", "1", "--json", *node)
    assert set(consumed) == ELEMENT_FIELDS | {"deliveries", "reason"}
    assert (consumed["text"], consumed["position"]) == ("c", positions[2])

    (last,) = json_lines("enqueue", "-q", "jobs", "e", "--json", *node)
    assert last["size"] == 2  # d and e wait; a, b and c are gone


def test_without_json_enqueue_prints_nothing(skueued_cluster: StartCluster) -> None:
    out = skueue("enqueue", "x", "--node", skueued_cluster(1).addresses[0])
    assert out.returncode == 0 and out.stdout == b"", out.stderr


class Unreachable:
    async def stats(self) -> dict[str, Any]:
        raise NodeUnreachable("the connection to d was closed")


class Answers:
    def __init__(self, stats: dict[str, Any]) -> None:
        self.answer = stats

    async def stats(self) -> dict[str, Any]:
        return self.answer


@pytest.mark.trio
@pytest.mark.parametrize(
    ("client", "size"),
    [
        (Unreachable(), None),
        (Answers({"queues": {"jobs": {"size": None}}}), None),  # the anchor did not answer
        (Answers({"queues": {}}), None),
        (Answers({"queues": {"jobs": {"size": 7}}}), 7),
    ],
)
async def test_the_size_is_null_where_it_is_not_known(client: Any, size: int | None) -> None:
    assert await queue_size(client, "jobs") == size
