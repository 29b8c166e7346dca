"""``skueued``: run one Skueue process (its three virtual nodes) as a daemon.

    skueued --listen HOST:PORT [--peers ADDR,... | --join SEED] [--id ID]
            [--cluster-key FILE] [--client-tokens FILE]
            [--tls-cert FILE --tls-key FILE [--tls-ca FILE] [--tls-client-ca FILE]]
            [--plaintext] [--structure queue|stack] [--value-bytes-max BYTES]
            [--log-format json|console] [--log-level LEVEL]

Alone it is a one-process cluster; with ``--peers`` it forms a static cluster with every
listed daemon (each must be started with the others as its peers); with ``--join`` it
joins the cluster SEED belongs to (and prints its ready line once it is in the ring).
A daemon that was asked to leave (``skueue leave``) exits once its data is held by the
others.  It prints one line
on stdout when ready and shuts down cleanly on SIGTERM or SIGINT.

Beyond loopback it speaks TLS (``--tls-cert``/``--tls-key``) or refuses to start, unless
``--plaintext`` asks for plaintext links explicitly; on loopback plaintext is the default.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import NoReturn

import attrs
import trio

from skueue.cli import config_file
from skueue.cli.args import (
    EXIT_FAILED,
    EXIT_USAGE,
    Parser,
    add_version,
    address,
    fail,
    non_negative_int,
)
from skueue.cli.running import leaves
from skueue.core.ops import Structure
from skueue.host.address import AddressError, parse_address, parse_addresses
from skueue.runtime.client_auth import ClientTokens
from skueue.runtime.daemon import Daemon, DaemonConfig
from skueue.runtime.disk_space import disk_failure
from skueue.runtime.errors import DaemonError
from skueue.runtime.input_log import SyncPolicy
from skueue.runtime.limits import Limits
from skueue.runtime.logging import LOG_FORMAT, configure
from skueue.runtime.peer_auth import ClusterKeys
from skueue.runtime.state import log
from skueue.runtime.tls import DaemonTls, TlsFiles

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


async def serve(config: DaemonConfig) -> None:
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        # Signals are watched before start-up finishes: a daemon still waiting for its
        # peers must stop on SIGTERM too.
        nursery.start_soon(stop_on_signal, nursery.cancel_scope)
        address = await nursery.start(daemon.run)
        print(f"skueued ready: {daemon.process_id} listening on {address}", flush=True)
        await daemon.left.wait()
        await daemon.drain_links()
        say("exiting: left the cluster", "skueued: left the cluster, exiting")
        nursery.cancel_scope.cancel()


async def stop_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            say("shutting down", f"skueued: {name}, shutting down", signal=name)
            scope.cancel()
            return


def say(event: str, plain: str, **fields: str) -> None:
    """A line for the operator on stderr: in JSON mode a JSON event like every other
    line of the log (issue 28, item 14), else ``plain``."""
    if LOG_FORMAT.json:
        log.info(event, **fields)
    else:
        print(plain, file=sys.stderr, flush=True)


def die(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop with one line: a JSON event in JSON mode, else ``skueued: error: ...``."""
    if LOG_FORMAT.json:
        log.error(message)
        raise SystemExit(code)
    fail("skueued", message, code)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = config_file.parse_args(parser, argv, "skueued")
    # First: every line from here on, errors included, is in the format asked for.
    configure(args.log_format, args.log_level)
    try:
        listen = parse_address(args.listen)
        peers = tuple(parse_addresses(args.peers))
        join = parse_address(args.join) if args.join else None
        advertise = parse_address(args.advertise) if args.advertise else None
        fsync = SyncPolicy.parse(args.fsync)
    except (AddressError, ValueError) as e:
        die(str(e))
    if join is not None and peers:
        die("--join and --peers exclude each other")
    if args.in_memory and args.data_dir:
        die("--in-memory and --data-dir exclude each other")
    tls_files = tls_options(args)
    if tls_files is None and not listen.is_loopback() and not args.plaintext:
        die(
            f"listening on {listen} (beyond loopback) without TLS: give --tls-cert and "
            "--tls-key (skueue certs makes them), or --plaintext to accept plaintext links",
        )
    try:
        keys = ClusterKeys.load(Path(args.cluster_key)) if args.cluster_key else None
        tokens = ClientTokens.load(Path(args.client_tokens)) if args.client_tokens else None
        tls = DaemonTls.load(tls_files) if tls_files is not None else None
    except DaemonError as e:
        die(str(e))
    if tls is not None and tls.peer_issuers is None:
        log.warning(
            "TLS without --tls-ca: peers' certificates are not checked, so an attacker on "
            "the path could sit in the middle of a peer link (give every member --tls-ca)"
        )
    if keys is None and not listen.is_loopback():
        log.warning(
            "listening beyond loopback without a cluster key: anyone who can reach the port "
            "can act as a member (start every member with --cluster-key)",
            listen=str(listen),
        )
    if tokens is None and (tls is None or tls.client_issuers is None) and not listen.is_loopback():
        log.warning(
            "listening beyond loopback without client tokens: anyone who can reach the port "
            "can use the queue and make the daemon leave (--client-tokens FILE)",
            listen=str(listen),
        )
    try:
        limits = attrs.evolve(
            Limits(),
            value_bytes_max=args.value_bytes_max,
            snapshot_log_bytes=args.snapshot_bytes,
            disk_free_min_bytes=args.disk_free_min,
        )
    except ValueError as e:
        die(str(e))
    config = DaemonConfig(
        listen,
        peers,
        args.process_id,
        Structure(args.structure),
        limits=limits,
        join=join,
        advertise=advertise,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        data_root=None if args.in_memory else DEFAULT_DATA_ROOT,
        fsync=fsync,
        cluster_keys=keys,
        client_tokens=tokens,
        metrics=parse_address(args.metrics) if args.metrics else None,
        tls=tls,
    )
    if args.print_config:
        print(config_file.render(parser, args), end="")
        return 0
    try:
        trio.run(serve, config)
    except BaseException as e:  # noqa: BLE001 - unwrap a start-up error from task groups
        error = startup_error(e)
        if error is None:
            raise
        die(str(error), EXIT_FAILED)
    return 0


def tls_options(args: argparse.Namespace) -> TlsFiles | None:
    """The TLS files named, checked for what goes together (None: no TLS)."""
    if args.tls_cert is None and args.tls_key is None:
        for option in ("tls_ca", "tls_client_ca"):
            if getattr(args, option) is not None:
                die(f"--{option.replace('_', '-')} needs --tls-cert and --tls-key")
        return None
    if args.tls_cert is None or args.tls_key is None:
        die("--tls-cert and --tls-key go together")
    if args.plaintext:
        die("--plaintext and --tls-cert exclude each other")
    return TlsFiles(
        Path(args.tls_cert),
        Path(args.tls_key),
        Path(args.tls_ca) if args.tls_ca else None,
        Path(args.tls_client_ca) if args.tls_client_ca else None,
    )


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


def startup_error(e: BaseException) -> DaemonError | None:
    """The DaemonError inside ``e``, however deep in exception groups, if that is all it is;
    a write the disk refused (out of space, read-only, failing) is one too."""
    found = leaves(e)
    if len(found) == 1 and isinstance(found[0], DaemonError):
        return found[0]
    disk = disk_failure(found[0]) if len(found) == 1 else None
    return None if disk is None else DaemonError(disk)


if __name__ == "__main__":
    sys.exit(main())
