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
import os
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
    fail,
    port_range,
)
from skueue.cli.running import leaves
from skueue.cli.skueued_options import DEFAULT_DATA_ROOT, build_parser
from skueue.core.ops import Structure
from skueue.host.address import AddressError, parse_address, parse_addresses
from skueue.runtime.daemon import Daemon, DaemonConfig
from skueue.runtime.durability.disk_space import disk_failure
from skueue.runtime.durability.input_log import SyncPolicy
from skueue.runtime.errors import DaemonError
from skueue.runtime.limits import Limits
from skueue.runtime.network.handshake import REPLICAS_AUTO
from skueue.runtime.operations.logging import LOG_FORMAT, configure
from skueue.runtime.security.client_auth import ClientTokens
from skueue.runtime.security.peer_auth import ClusterKeys
from skueue.runtime.security.tls import DaemonTls, TlsFiles
from skueue.runtime.state import log


async def serve(config: DaemonConfig) -> bool:
    """Run the daemon until it is stopped or leaves; True when it must start again
    from its data directory (its process is handed back: runtime/homecoming.py)."""
    daemon = Daemon(config)
    daemon.ctx.can_restart = True
    async with trio.open_nursery() as nursery:
        # Signals are watched before start-up finishes: a daemon still waiting for its
        # peers must stop on SIGTERM too.
        nursery.start_soon(stop_on_signal, nursery.cancel_scope)
        nursery.start_soon(restart_on_homecoming, daemon.ctx.homecoming, nursery.cancel_scope)
        address = await nursery.start(daemon.run)
        print(f"skueued ready: {daemon.process_id} listening on {address}", flush=True)
        await daemon.left.wait()
        await daemon.drain_links()
        say("exiting: left the cluster", "skueued: left the cluster, exiting")
        nursery.cancel_scope.cancel()
    return daemon.ctx.homecoming.is_set()


async def restart_on_homecoming(homecoming: trio.Event, scope: trio.CancelScope) -> None:
    await homecoming.wait()
    scope.cancel()


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
    # Given values are checked here; a value decided at start, there (runtime/replica_count.py).
    replicas = REPLICAS_AUTO if args.replicas is None else args.replicas
    if replicas > 1 and args.in_memory:
        die("--replicas needs a data directory: a replica acknowledges what it holds on disk")
    if replicas > 1 + len(set(peers)) and join is None:
        die(f"--replicas {replicas} needs at least {replicas} members; --peers "
            f"names {len(set(peers))} other(s)")
    if (args.restore_from_copies or args.failover) and (replicas == 1 or args.in_memory):
        option = "--restore-from-copies" if args.restore_from_copies else "--failover"
        die(f"{option} needs --replicas 3 or 5: with 1, no other member keeps a copy of "
            "a member's process")
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
            member_lost_after_s=args.member_lost_after,
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
        replicas=replicas,
        restore_from_copies=args.restore_from_copies,
        failover=args.failover,
        stand_in_ports=port_range(args.stand_in_ports) if args.stand_in_ports else None,
        cluster_keys=keys,
        client_tokens=tokens,
        metrics=parse_address(args.metrics) if args.metrics else None,
        tls=tls,
    )
    if args.print_config:
        print(config_file.render(parser, args), end="")
        return 0
    try:
        restart = trio.run(serve, config)
    except BaseException as e:  # noqa: BLE001 - unwrap a start-up error from task groups
        error = startup_error(e)
        if error is None:
            raise
        die(str(error), EXIT_FAILED)
    if restart:
        # The same command again, in this process (its pid, its supervisor): the data
        # directory's lock and every socket were closed with the daemon.
        say("restarting", "skueued: restarting from the data directory")
        arguments = sys.argv[1:] if argv is None else argv
        os.execv(sys.executable, [sys.executable, sys.argv[0], *arguments])
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
