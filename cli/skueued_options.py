"""``skueued``'s options: the table of its command line, each option's type and limit.

``cli/skueued.py`` parses with it, builds the daemon's configuration and runs it; a
config file (``--config``) fills the same options (``cli/config_file.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from skueue.cli import config_file
from skueue.cli.args import (
    Parser,
    add_version,
    address,
    non_negative_float,
    non_negative_int,
    port_range_text,
    replica_count,
)
from skueue.host.address import AddressError, parse_addresses
from skueue.runtime.durability.input_log import SyncPolicy
from skueue.runtime.limits import Limits

# A frame holds one value and the request around it.
VALUE_ROOM_BYTES = 1024


# The smallest --snapshot-bytes: a snapshot per few records would be all the daemon does.
SNAPSHOT_BYTES_MIN = 4096

# Where a daemon keeps its data unless told otherwise (--data-dir, --in-memory): a
# directory named after its process id in here, relative to the working directory.
DEFAULT_DATA_ROOT = Path("skueue-data")


def build_parser() -> Parser:
    p = Parser(prog="skueued", description="Run one Skueue process as a daemon.")
    add_version(p, "skueued")
    config_file.add_config_options(p)
    p.add_argument(
        "--listen",
        required=True,
        type=address,
        metavar="HOST:PORT",
        help="address to listen on for peers and clients (port 0: any free port)",
    )
    p.add_argument(
        "--advertise",
        type=address,
        metavar="HOST:PORT",
        help="address the other members reach this daemon at, where it is not the listen "
        "address (a container's port mapping, NAT, a proxy) (default: the listen address)",
    )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="keep a write-ahead log of the daemon's inputs in DIR and come back from it "
        "after a crash or restart (default: skueue-data/ID in the "
        "working directory)",
    )
    p.add_argument(
        "--snapshot-bytes",
        type=snapshot_limit,
        default=Limits().snapshot_log_bytes,
        metavar="BYTES",
        help="with a data directory: compact the input log into a snapshot when it reaches "
        "BYTES, which bounds the replay at restart",
    )
    p.add_argument(
        "--disk-free-min",
        type=non_negative_int,
        default=Limits().disk_free_min_bytes,
        metavar="BYTES",
        help="with a data directory: refuse enqueues (retryably; dequeues go on) while "
        "less than BYTES are free there, so that the disk never fills (0: never refuse)",
    )
    p.add_argument(
        "--in-memory",
        action="store_true",
        help="keep nothing on disk: a crash or restart loses this member's state",
    )
    p.add_argument(
        "--fsync",
        type=sync_policy,
        default="batch",
        metavar="POLICY",
        help="with --data-dir: batch (or always: one fsync per step, before its replies and "
        "messages go out), interval=MS (at most every MS; a power loss may lose the last "
        "MS), never (the kernel decides)",
    )
    p.add_argument(
        "--replicas",
        type=replica_count,
        metavar="K",
        help="keep each process's input log on K members (1, 3 or 5; at most the members; "
        "the same on every member): an input's replies and messages go out once a majority "
        "of them hold it durably (default: 3 where the cluster starts with at least 3 "
        "members and a data directory, else 1; a joiner takes its seed's; a restart keeps "
        "what its data directory started with) (README, When a member dies)",
    )
    p.add_argument(
        "--failover",
        action=argparse.BooleanOptionalAction,
        help="with --replicas 3 or 5 (on every member): a member down for the failure "
        "timeout (3 to 6 s) no longer stops the cluster: a member that keeps a copy of its "
        "process takes it over (default: on with --replicas 3 or 5; --no-failover: the "
        "cluster waits for the member) (README, When a member dies)",
    )
    p.add_argument(
        "--stand-in-ports",
        type=port_range_text,
        metavar="LOW-HIGH",
        help="with failover: a member that takes over another's process serves it on the "
        "first free port of this range on its listen host, to open between the members "
        "and to the clients (default: a port the system picks; so too when none is free)",
    )
    p.add_argument(
        "--member-lost-after",
        type=non_negative_float,
        default=Limits().member_lost_after_s,
        metavar="SECONDS",
        help="with failover (on with replicas by default): a member not heard from for "
        "SECONDS is taken for lost for good, and every group that kept a copy on it gets a "
        "new one on a survivor, as after skueue remove-member (0: only that command)",
    )
    p.add_argument(
        "--restore-from-copies",
        action="store_true",
        help="start in place of a member lost with its disk (same address, --peers and "
        "--replicas; an empty --data-dir): its process comes back from the copies the other "
        "members keep (README, When a member dies)",
    )
    p.add_argument(
        "--peers",
        type=addresses,
        default="",
        metavar="ADDR,...",
        help="the other members of a static cluster",
    )
    p.add_argument(
        "--join", type=address, metavar="SEED", help="join the cluster the daemon at SEED is in"
    )
    p.add_argument(
        "--client-tokens",
        metavar="FILE",
        help="serve only clients with one of these tokens (lines of ROLE TOKEN, ROLE client "
        "or admin; admin may also make the daemon join or leave)",
    )
    p.add_argument(
        "--cluster-key",
        metavar="FILE",
        help="the cluster's secret key (skueue keygen makes one; the same on every member): "
        "every peer link proves both ends hold it",
    )
    p.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="TLS on every connection, peers and clients: this daemon's certificate "
        "(PEM; skueue certs makes one) (needs --tls-key)",
    )
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    p.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="with --tls-cert: peer links are mutual TLS, each end's certificate signed by "
        "this CA and marked OU=peer (without it, peers' certificates are not checked)",
    )
    p.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="with --tls-cert: clients may present a certificate signed by this CA instead "
        "of a token (OU=admin: the admin role); without --client-tokens they must",
    )
    p.add_argument(
        "--plaintext",
        action="store_true",
        help="allow listening beyond loopback without TLS (refused otherwise)",
    )
    p.add_argument(
        "--id",
        dest="process_id",
        help="process id: a stable name, unique in the cluster, kept across restarts "
        "(default: the advertised address)",
    )
    p.add_argument(
        "--structure",
        choices=["queue", "stack"],
        default="queue",
        help="what the cluster serves: FIFO queue or LIFO stack (the same on every member)",
    )
    p.add_argument(
        "--value-bytes-max",
        type=value_limit,
        default=Limits().value_bytes_max,
        metavar="BYTES",
        help="largest element a client may store (set the same on every member)",
    )
    p.add_argument(
        "--metrics",
        type=address,
        metavar="HOST:PORT",
        help="serve Prometheus metrics (/metrics) and health probes (/healthz, /readyz) "
        "over HTTP here",
    )
    p.add_argument(
        "--log-format",
        choices=["json", "console"],
        default="console",
        help="log lines on stderr: JSON objects (for skueue analyze) or human-readable",
    )
    p.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default="info",
        help="least severe level logged",
    )
    return p


def value_limit(text: str) -> int:
    """A value limit that fits a frame with room for the request around it."""
    most = Limits().frame_bytes_max - VALUE_ROOM_BYTES
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"{text} is not between 1 and {most} bytes")
    return value


def snapshot_limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < SNAPSHOT_BYTES_MIN:
        raise argparse.ArgumentTypeError(f"must be at least {SNAPSHOT_BYTES_MIN}, not {value}")
    return value


def addresses(text: str) -> str:
    """``ADDR,...``, each checked here so that a bad one is a usage error."""
    try:
        return ",".join(str(a) for a in parse_addresses(text))
    except AddressError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def sync_policy(text: str) -> str:
    try:
        SyncPolicy.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--fsync: ")) from None
    return text
