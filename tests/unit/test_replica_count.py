"""What a daemon not given ``--replicas`` or ``--failover`` runs with
(runtime/replica_count.py), and the hello's "yours" (runtime/network/handshake.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skueue.host.address import Address
from skueue.runtime.config import DaemonConfig
from skueue.runtime.durability.input_log import InputLog, Meta, SyncPolicy
from skueue.runtime.errors import DaemonError
from skueue.runtime.network.handshake import REPLICAS_AUTO, PeerGreeting, replicas_mismatch
from skueue.runtime.replica_count import decide

ME = Address("127.0.0.1", 7400)


def auto(peers: int = 0, **options: object) -> DaemonConfig:
    """Neither --replicas nor --failover given (unless ``options`` say)."""
    others = tuple(Address("127.0.0.1", 7401 + i) for i in range(peers))
    given = {"replicas": REPLICAS_AUTO, "failover": None, **options}
    return DaemonConfig(ME, others, **given)  # type: ignore[arg-type]


def chosen(config: DaemonConfig, directory: Path | None) -> tuple[int, bool | None]:
    decided = decide(config, directory, ME)
    return decided.replicas, decided.failover


def test_three_durable_members_replicate_with_failover_and_fewer_do_not(tmp_path: Path) -> None:
    assert chosen(auto(2), tmp_path / "d") == (3, True)
    assert chosen(auto(4), tmp_path / "d") == (3, True)  # 3, not one per member
    assert chosen(auto(1), tmp_path / "d") == (1, False)
    assert chosen(auto(0), tmp_path / "d") == (1, False)
    assert chosen(auto(2), None) == (1, False)  # in memory
    # A member that lists itself among its peers is counted once.
    listed = DaemonConfig(ME, (ME, Address("127.0.0.1", 7401)), replicas=REPLICAS_AUTO,
                          failover=None)  # fmt: skip
    assert chosen(listed, tmp_path / "d") == (1, False)


def test_a_restart_keeps_what_its_data_directory_started_with(tmp_path: Path) -> None:
    for k in (1, 3):
        directory = tmp_path / str(k)
        InputLog.open(directory, Meta(str(ME), "n", "queue", (), replicas=k), SyncPolicy()).close()
        assert chosen(auto(2), directory) == (k, k > 1)
        assert chosen(auto(0), directory) == (k, k > 1)


def test_given_values_stand_and_a_joiner_waits_for_its_seed(tmp_path: Path) -> None:
    assert chosen(DaemonConfig(ME, replicas=1, failover=None), tmp_path) == (1, False)
    assert chosen(auto(2, failover=False), tmp_path / "d") == (3, False)
    joiner = auto(join=Address("127.0.0.1", 7500))
    assert decide(joiner, tmp_path / "j", ME) == joiner  # its seed's hello decides
    assert chosen(joiner, None) == (1, False)  # unless it is in memory


def test_failover_or_a_restore_with_one_replica_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DaemonError, match="--failover needs --replicas 3 or 5"):
        decide(auto(1, failover=True), tmp_path / "d", ME)
    with pytest.raises(DaemonError, match="--restore-from-copies needs --replicas 3 or 5"):
        decide(auto(1, restore_from_copies=True), tmp_path / "d", ME)


def test_a_joiners_hello_says_yours_and_only_a_member_can_answer_it() -> None:
    def hello(replicas: int) -> PeerGreeting:
        return PeerGreeting("p", "127.0.0.1:7401", "n", 0, replicas=replicas)

    assert replicas_mismatch("me", 3, hello(REPLICAS_AUTO)) is None  # a joiner takes ours
    assert replicas_mismatch("me", 3, hello(3)) is None
    assert "p runs with --replicas 1 and me with 3" in (replicas_mismatch("me", 3, hello(1)) or "")
    assert "still joining" in (replicas_mismatch("me", REPLICAS_AUTO, hello(3)) or "")
