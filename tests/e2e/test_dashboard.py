"""``deploy/grafana/skueue.json`` (issue 15, item 6): a Grafana dashboard whose every
query names metrics a real daemon serves.

The static checks read the JSON alone (its shape, the datasource variable, the panels
the issue asks for, a grid without overlaps); the e2e check starts two durable daemons
with ``--metrics``, runs a small workload so that every histogram has samples, scrapes
both (the queue depth is served by the anchor only) and checks that each metric name in
the panels' and variables' queries is among the samples served.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from skueue.client.blocking import connect_blocking
from tests.e2e.daemons import Cluster
from tests.e2e.test_metrics import METRICS, metrics_address, scrape

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "skueue.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
GRID_COLUMNS = 24
StartCluster = Callable[..., Cluster]

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "inf", "nan",
}  # fmt: skip
"""Identifiers in an expression that are not metric names (functions are told by the
``(`` after them)."""

# What the issue asks the dashboard to show, by the metric that shows it.
REQUIRED = {
    "throughput": "skueue_operations_total",
    "latency percentiles": "skueue_request_duration_seconds_bucket",
    "depth per queue": "skueue_queue_depth",
    "entries per member": "skueue_entries",
    "update phases": "skueue_update_phases_total",
    "retransmits": "skueue_peer_frames_resent_total",
    "fsync latency": "skueue_fsync_duration_seconds_bucket",
    "CPU": "process_cpu_seconds_total",
    "RSS": "process_resident_memory_bytes",
}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def expressions(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' targets and the query variables'."""
    found = [t["expr"] for p in panels(board) for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found.append(query["query"] if isinstance(query, dict) else query)
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads: label matchers, ranges, strings and the
    labels of ``by``/``without`` taken out, what remains is functions (followed by
    ``(``), keywords, numbers and metric names."""
    rest = re.sub(r'"(?:[^"\\]|\\.)*"', " ", expr)
    rest = re.sub(r"\{[^}]*\}", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", rest)
    rest = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    rest = re.sub(r"label_values\(([^,()]+),[^)]*\)", r"\1", rest)
    names = re.findall(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", rest)
    return {n for n in names if n.lower() not in PROMQL_WORDS}


def test_metric_names_are_told_from_functions_labels_and_keywords() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, request) (rate(skueue_x_bucket{job=~"$job", '
        'outcome="ok"}[$__rate_interval]))) / clamp_min(min(skueue_y), 1) or vector(0)'
    )
    assert metric_names(expr) == {"skueue_x_bucket", "skueue_y"}
    assert metric_names('label_values(skueue_ready{job=~"$job"}, instance)') == {"skueue_ready"}


def test_the_dashboard_is_a_grafana_model_over_one_prometheus_variable() -> None:
    board = dashboard()
    assert 36 <= board["schemaVersion"] <= 41 and board["uid"] and board["title"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for p in panels(board):
        if p["type"] == "row":
            continue
        assert p["datasource"] == DATASOURCE, p["title"]
        assert p["targets"] and p.get("description"), p["title"]
        for target in p["targets"]:
            assert target["datasource"] == DATASOURCE, p["title"]
            expr = target["expr"]
            assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}")
            assert "$__rate_interval" in expr or "rate(" not in expr, expr
    for v in variables.values():
        if v["type"] == "query":
            assert v["datasource"] == DATASOURCE, v["name"]


def test_the_grid_has_no_overlaps() -> None:
    taken: set[tuple[int, int]] = set()
    for p in panels(dashboard()):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= GRID_COLUMNS, p["title"]
        cells = {(g["x"] + i, g["y"] + j) for i in range(g["w"]) for j in range(g["h"])}
        assert not cells & taken, f"{p['title']} overlaps another panel"
        taken |= cells


@pytest.mark.parametrize(("what", "metric"), sorted(REQUIRED.items()))
def test_the_dashboard_shows_what_the_issue_asks_for(what: str, metric: str) -> None:
    used = [e for e in expressions(dashboard()) if metric in metric_names(e)]
    assert used, f"no panel shows {what} ({metric})"
    if metric.endswith("_bucket"):
        assert any("histogram_quantile(" in e for e in used), f"{what}: no percentile"


def test_every_metric_in_the_dashboard_is_served_by_a_real_daemon(
    skueued_cluster: StartCluster,
) -> None:
    cluster = skueued_cluster(2, extra_args=METRICS)  # durable: fsyncs are timed
    with connect_blocking(cluster.addresses[0]) as q:
        q.enqueue_many([b"a", b"b", b"c"], queue="jobs")
        assert q.dequeue(queue="jobs") is not None
        leased = q.dequeue(queue="jobs", lease=30)
        assert leased is not None and q.ack(leased)
        assert q.dequeue(queue="nothing") is None
    served: set[str] = set()
    for d in cluster.daemons:
        served |= {name for name, _, _ in scrape(metrics_address(d))}
    used = set().union(*(metric_names(e) for e in expressions(dashboard())))
    assert set(REQUIRED.values()) <= used
    missing = sorted(used - served)
    assert not missing, f"the dashboard queries metrics no daemon serves: {missing}"
