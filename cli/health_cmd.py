"""``skueue health``: is a daemon ready to serve?  Exit codes for scripts and probes.

Two ways to ask, the same answer (``runtime/operations/health.py`` decides it in the daemon):

- ``--node ADDR`` (the default, ``$SKUEUE_NODE``): the client protocol's stats request,
  as ``skueue stats`` sends it (an admin connection, ``$SKUEUE_TOKEN`` where the daemon
  wants a token); the daemon's own entry says whether it is ready and why not.  Needs
  nothing but the client port.  A peer that is down makes the answer wait for the stats
  deadline (2 s).
- ``--metrics HOST:PORT``: ``GET /readyz`` on the daemon's ``--metrics`` address, plain
  HTTP, which a load balancer or Kubernetes can also use.

It prints ``ready`` or ``not ready: REASON`` and exits 0 (ready), 1 (not ready) or 2
(the question could not be asked: a usage error, the daemon unreachable, no answer in
``--timeout``, an answer that is not one); 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import http.client
from typing import Any

from skueue.cli.args import EXIT_FAILED, EXIT_USAGE, address, fail
from skueue.cli.client_cmds import add_node_option, add_tls_options, request_timeout, with_client
from skueue.client.api import Client

PROG = "skueue health"
EXIT_READY = 0
EXIT_NOT_READY = 1
EXIT_UNKNOWN = EXIT_USAGE  # 2: could not tell (unreachable, no answer, bad answer)
HEALTH_TIMEOUT_S = 5.0
READYZ_BYTES_MAX = 4096  # a /readyz answer is one short line


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "health",
        help="is a daemon ready? (exit 0 ready, 1 not ready, 2 cannot tell)",
        description="Ask a daemon whether it is ready: in the ring, its peers reachable, not "
        "stalled in an update phase.  Exit 0 ready, 1 not ready, 2 cannot tell.",
    )
    where = p.add_mutually_exclusive_group()
    add_node_option(where, tls=False)  # the TLS options go with --node, not instead of it
    add_tls_options(p)
    where.add_argument(
        "--metrics",
        type=address,
        metavar="HOST:PORT",
        help="ask GET /readyz on the daemon's --metrics address instead",
    )
    p.add_argument(
        "--timeout",
        type=request_timeout,
        default=HEALTH_TIMEOUT_S,
        metavar="SECONDS",
        help="give up (exit 2) after this long",
    )
    p.set_defaults(run=run_health)


def run_health(args: argparse.Namespace) -> int:
    if args.metrics is not None:
        ready, reason = over_http(args.metrics, args.timeout)
    else:
        ready, reason = over_client_protocol(args)
    print("ready" if ready else f"not ready: {reason}")
    return EXIT_READY if ready else EXIT_NOT_READY


def over_http(where: str, timeout_s: float) -> tuple[bool, str]:
    host, _, port = where.rpartition(":")
    connection = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout_s)
    try:
        connection.request("GET", "/readyz")
        response = connection.getresponse()
        body = response.read(READYZ_BYTES_MAX).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException) as e:
        fail(PROG, f"cannot ask {where}/readyz: {e}", EXIT_UNKNOWN)
    finally:
        connection.close()
    if response.status not in (200, 503):
        fail(PROG, f"{where}/readyz answered {response.status} {response.reason}", EXIT_UNKNOWN)
    return response.status == 200, body


def over_client_protocol(args: argparse.Namespace) -> tuple[bool, str]:
    async def body(q: Client) -> tuple[str, dict[str, Any]]:
        return q.process_id, await q.stats()

    try:
        process, stats = with_client(PROG, args, body, admin=True)
    except SystemExit as e:
        # with_client said why in one line; a failed request here means "cannot tell".
        raise SystemExit(EXIT_UNKNOWN if e.code == EXIT_FAILED else e.code) from None
    own = next((m for m in stats.get("members") or [] if m.get("process") == process), None)
    if own is None or not isinstance(own.get("ready"), bool):
        fail(PROG, f"{process} does not report its readiness (an older skueued?)", EXIT_UNKNOWN)
    return own["ready"], str(own.get("ready_reason", ""))
