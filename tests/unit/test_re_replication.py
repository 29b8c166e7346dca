"""Re-replication's plan (runtime/re_replication.py) and the copies a daemon opens for
it (runtime/replicas.py), without daemons.  (On real daemons, two hosts lost one after
the other: tests/e2e/test_re_replication.py.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from skueue.cli.skueued_options import build_parser
from skueue.replication.config import AddLearner, Config, Promote, Remove
from skueue.runtime.failover import host_lost
from skueue.runtime.limits import Limits
from skueue.runtime.member_silence import Hearing
from skueue.runtime.re_replication import next_change, reconfigure, toward_placement
from skueue.runtime.replicas import DaemonReplicas

RING = ["a", "b", "c", "d", "e"]


def plan(config: Config, lost: set[str], up: set[str] | None = None) -> object:
    reachable = set(RING) if up is None else up
    return next_change("a", config, lost, RING, 3, reachable.__contains__)


def test_a_lost_voter_is_replaced_by_adding_then_promoting_then_removing() -> None:
    config, lost = Config.of("abc"), {"a"}
    steps = []
    while (change := plan(config, lost)) is not None:
        steps.append(change)
        match change:
            case AddLearner(host=h):
                config = Config.of(config.voters, (*config.learners, h))
            case Promote(host=h):
                config = Config.of((*config.voters, h), set(config.learners) - {h})
            case Remove(host=h):
                config = Config.of(set(config.voters) - {h}, set(config.learners) - {h})
        # A majority of the voters is live at every step.
        live = [v for v in config.voters if v not in lost]
        assert len(live) >= config.majority(), config
    assert steps == [AddLearner("d"), Promote("d"), Remove("a")]
    assert config == Config.of("bcd")


def test_the_new_replica_is_the_first_reachable_host_after_the_process() -> None:
    assert plan(Config.of("abc"), {"b"}) == AddLearner("d")
    assert plan(Config.of("abc"), {"b"}, up={"a", "c", "e"}) == AddLearner("e")
    assert plan(Config.of("abc"), {"b", "d"}) == AddLearner("e")


def test_with_no_host_to_add_the_lost_one_is_removed_all_the_same() -> None:
    assert plan(Config.of("abc"), {"b"}, up=set()) == Remove("b")
    assert plan(Config.of("abc"), {"b", "d", "e"}) == Remove("b")


def test_a_lost_learner_goes_first_and_a_group_without_a_lost_host_is_left_alone() -> None:
    assert plan(Config.of("abc", "d"), {"d"}) == Remove("d")
    assert plan(Config.of("abc", "d"), {"a"}) == Promote("d")
    assert plan(Config.of("abc"), {"e"}) is None


def replicas(limits: Limits, opened: list[str]) -> DaemonReplicas:
    group: Any = SimpleNamespace()
    channels: Any = SimpleNamespace(senders={}, links=SimpleNamespace(process_id="me"))
    r = DaemonReplicas("me", group, {}, channels, SimpleNamespace(), limits, 0.0)  # type: ignore[arg-type]
    r.ring = ["me", "P", "Q", "R"]
    r.open_copy = lambda process: opened.append(process) or SimpleNamespace()  # type: ignore[assignment, func-returns-value]
    return r


def test_a_copy_opens_for_a_leaders_append_up_to_replica_copies_max() -> None:
    opened: list[str] = []
    r = replicas(Limits(replica_copies_max=2), opened)
    assert r._copy_for("P", "P", ["raft", "P", ["vote", 1]]) is None  # not a leader's
    assert r._copy_for("X", "Y", ["raft", "Y", ["append", 1]]) is None  # not in the ring
    assert r._copy_for("P", "P", ["raft", "P", ["append", 1]]) is not None
    # A joiner, not in the ring yet, leads its own group: (the owner took the frame
    # only from a member of its directory).
    assert r._copy_for("J", "J", ["raft", "J", ["append", 1]]) is not None
    with capture_logs() as logs:
        assert r._copy_for("Q", "Q", ["raft", "Q", ["snapshot", 1]]) is None
    assert opened == ["P", "J"] and "replica_copies_max" in logs[0]["event"]


def test_a_group_with_fewer_voters_than_replicas_grows_on_the_next_hosts() -> None:
    config: Config = Config.of("a")  # a joiner's group
    steps = []
    while (change := plan(config, set(), up={"b", "c", "d"})) is not None:
        steps.append(change)
        if isinstance(change, AddLearner):
            config = Config.of(config.voters, (change.host,))
        else:
            assert isinstance(change, Promote)
            config = Config.of((*config.voters, change.host))
    assert steps == [AddLearner("b"), Promote("b"), AddLearner("c"), Promote("c")]
    # One that lost a host when nobody could take its place grows once one can.
    assert plan(Config.of("ab"), set(), up=set()) is None
    assert plan(Config.of("ab"), set(), up={"e"}) == AddLearner("e")


def test_a_new_copy_starts_from_the_leaders_snapshot() -> None:
    proposed: list[object] = []
    wanted: list[bool] = []
    node: Any = SimpleNamespace(host="a", config=Config.of("a"), snapshot_index=0)
    group: Any = SimpleNamespace(group="a", node=node,
                                 change_config=lambda c: proposed.append(c))  # fmt: skip
    reconfigure(group, set(), RING, 3, lambda h: True, lambda: wanted.append(True))
    assert proposed == [] and wanted == [True]  # none yet: it takes one first
    node.snapshot_index = 7
    reconfigure(group, set(), RING, 3, lambda h: True, lambda: wanted.append(True))
    assert proposed == [AddLearner("b")] and wanted == [True]


def test_a_homes_ring_takes_in_the_members_its_directory_met() -> None:
    r = replicas(Limits(), [])
    r.ring = []
    directory = SimpleNamespace(addresses={"me": 1, "J": 2}, departed=set())
    r.links = SimpleNamespace(directory=directory)
    r.founders = frozenset({"me", "P"})
    r.update_ring()
    assert sorted(r.ring) == ["J", "P", "me"]
    directory.addresses["K"] = 3
    r.update_ring()
    assert sorted(r.ring) == ["J", "K", "P", "me"]
    # J left while this daemon was away: the gossip says so, and its copy here goes.
    discarded: list[str] = []
    r.slots = {"J": SimpleNamespace(discard=lambda: discarded.append("J"))}  # type: ignore[dict-item]
    del directory.addresses["J"]
    directory.departed.add("J")
    r.update_ring()
    assert discarded == ["J"] and r.slots == {} and "J" in r.lost
    assert sorted(r.ring) == ["K", "P", "me"]


@pytest.mark.parametrize("hosts", [[], "P", [7], ["x" * 257], ["P"] * 17])
def test_a_bad_host_lost_frame_is_the_senders_fault(hosts: Any) -> None:
    dropped: list[str] = []
    lost: list[Any] = []
    ctx = SimpleNamespace(drop_channel_session=dropped.append)
    owner: Any = SimpleNamespace(ctx=ctx, replicas=SimpleNamespace(host_lost=lost.append))
    host_lost(owner, "b", ["host-lost", hosts])
    assert dropped == ["b"] and lost == []
    host_lost(owner, "b", ["host-lost", ["P"]])
    assert lost == [["P"]]


def test_only_members_are_taken_for_lost_hosts() -> None:
    r = replicas(Limits(), [])
    r.host_lost(["P", "nobody"])
    assert r.lost == {"P"}


def test_a_member_silent_for_member_lost_after_s_is_lost_for_good() -> None:
    """Silence, not a channel down: a hung member's connections stay up
    (runtime/member_silence.py; its own rules: tests/unit/test_member_silence.py)."""

    def silent_one(after: float) -> DaemonReplicas:
        r = replicas(Limits(member_lost_after_s=after), [])
        r.channels.hearing = Hearing()
        r.channels.links = SimpleNamespace(process_id="me",
                                           directory=SimpleNamespace(departed={"R"}))  # fmt: skip
        return r

    r = silent_one(60.0)
    for now in range(100, 161):  # a look at every second; P says nothing
        for member in ("Q", "R"):
            r.channels.hearing.heard(member, float(now))
        r._silent_for_good(float(now))
        assert r.lost == ({"P"} if now >= 160 else set()), now
    never = silent_one(0.0)
    for now in range(100, 200, 3):
        never._silent_for_good(float(now))
    assert never.lost == set()


def test_a_stand_in_never_takes_its_own_daemons_host_for_lost() -> None:
    """A stand-in's replicas speak for the process it serves (``own``); the daemon it
    runs in hears nothing from itself, and must not count that as silence."""
    r = replicas(Limits(member_lost_after_s=60.0), [])
    r.own, r.lost = "P", {"P"}  # it serves P, lost, on the daemon "me"
    r.channels.hearing = Hearing()
    r.channels.links = SimpleNamespace(process_id="me",
                                       directory=SimpleNamespace(departed=set()))  # fmt: skip
    for now in range(100, 200):
        for member in ("Q", "R"):
            r.channels.hearing.heard(member, float(now))
        r._silent_for_good(float(now))
    assert r.lost == {"P"}
    r.host_lost(["me"])
    assert r.lost == {"P"}


def test_the_silence_allowed_is_an_option_with_the_limits_default() -> None:
    parser, listen = build_parser(), ["--listen", "127.0.0.1:7400"]
    assert parser.parse_args(listen).member_lost_after == Limits().member_lost_after_s == 300
    assert parser.parse_args([*listen, "--member-lost-after", "0"]).member_lost_after == 0
    for bad in ("-1", "inf", "soon"):
        with pytest.raises(SystemExit):
            parser.parse_args([*listen, "--member-lost-after", bad])


def test_stats_say_which_hosts_are_lost_and_which_replica_catches_up() -> None:
    from skueue.cli.stats_format import _failover

    assert _failover({"hosts_lost": []}) == ""
    assert _failover({"hosts_lost": ["a"], "learners": ["d"]}) == (
        "hosts lost for good: a (re-replication; new replica catching up: d), ")
    assert _failover({"hosts_lost": ["a"], "learners": []}) == (
        "hosts lost for good: a (re-replication), ")


def test_a_group_its_home_leads_moves_one_copy_at_a_time_to_its_placement() -> None:
    # The ring is a, b, c, d, e (c joined, say) and a's group sits on a, b, d.
    def toward(
        config: Config, up: set[str] | None = None, lost: frozenset[str] = frozenset()
    ) -> object:
        reachable = set(RING) if up is None else up
        return toward_placement("a", config, lost, RING, 3, reachable.__contains__)

    assert toward(Config.of("abd")) == AddLearner("c")
    assert toward(Config.of("abd"), up={"a", "b", "d"}) is None  # c is down: it waits
    assert toward(Config.of("abd", "c")) is None  # next_change promotes the learner first
    assert toward(Config.of("abdc")) == Remove("d")  # then the copy outside goes
    assert toward(Config.of("abc")) is None  # placed
    assert toward(Config.of("abd"), lost=frozenset("e")) == AddLearner("c")
    assert toward(Config.of("abd"), lost=frozenset("d")) is None  # a lost host: next_change's to do


def test_a_dropped_copy_goes_only_on_its_homes_word(tmp_path: Any) -> None:
    discarded: list[str] = []
    r = replicas(Limits(), [])
    r.slots = {"P": SimpleNamespace(discard=lambda: discarded.append("P"))}  # type: ignore[dict-item]
    r.receive("Q", ["dropped", "P"])  # not P's home
    assert discarded == [] and "P" in r.slots
    r.receive("P", ["dropped", "P"])
    assert discarded == ["P"] and "P" not in r.slots
    r.receive("P", ["dropped", "P"])  # again: nothing left to drop
    assert discarded == ["P"]


def test_a_home_tells_the_copies_its_committed_configuration_no_longer_names() -> None:
    sent: list[tuple[str, list[Any]]] = []
    configs = {1: Config.of(["me", "P", "Q"]), 2: Config.of(["me", "P", "R"])}
    log_: Any = SimpleNamespace(config_at=lambda index: configs[index])
    node: Any = SimpleNamespace(host="me", commit=1, log=log_)
    r = replicas(Limits(), [])
    r.group = SimpleNamespace(node=node, leading=True)  # type: ignore[assignment]
    r.channels = SimpleNamespace(send=lambda to, frame: sent.append((to, frame)))  # type: ignore[assignment]
    r._tell_dropped()
    assert sent == []
    node.commit = 2  # Remove(Q) committed
    r._tell_dropped()
    assert sent == [("Q", ["dropped", "me"])]
    r._tell_dropped()
    assert sent == [("Q", ["dropped", "me"])]  # once per removal


def test_a_contact_is_heard_only_for_its_own_groups_replication() -> None:
    from skueue.runtime.replicas import takes_channel_frame

    directory: Any = SimpleNamespace(is_member=lambda p: p == "M", contacts={"J": "addr"})
    assert takes_channel_frame(directory, "M", ["stats-query", 1])  # a member: anything
    assert takes_channel_frame(directory, "J", ["raft", "J", ["append"]])  # a joiner's own
    assert not takes_channel_frame(directory, "J", ["raft", "M", ["append"]])
    assert not takes_channel_frame(directory, "J", ["stats-query", 1])
    assert not takes_channel_frame(directory, "X", ["raft", "X", ["append"]])  # a stranger
