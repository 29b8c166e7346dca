"""The replication codec (skueue/replication/codec.py): every kind round-trips, through
real msgpack too; every refusal is one :class:`ReplicationCodecError` naming the field;
every limit holds at its value and refuses one past it; garbage is taken or refused,
never anything else.  Hypothesis prints the blob of a failing example (tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skueue.replication import codec as codec_module
from skueue.replication.codec import (
    DEFAULT_CODEC,
    INT_END,
    CodecLimits,
    ReplicationCodec,
    ReplicationCodecError,
    decode_message,
    encode_message,
)
from skueue.replication.config import Config
from skueue.replication.messages import (
    ENTRY_KINDS,
    MESSAGE_KINDS,
    AppendEntries,
    AppendReply,
    Entry,
    Message,
    RequestVote,
    Snapshot,
    TimeoutNow,
    VoteReply,
)
from tests.unit.test_wire import mutate, normalise, strictly_equal, values

# ---------------------------------------------------------------- strategies

ints = st.integers(0, INT_END - 1) | st.sampled_from([0, 1, INT_END - 1])
host_ids = st.text(min_size=1, max_size=8) | st.sampled_from(["a", "b", "h" * 256])


@st.composite
def configs(draw: st.DrawFn) -> Config:
    hosts = draw(st.lists(host_ids, unique=True, max_size=7))
    split = draw(st.integers(0, len(hosts)))
    return Config.of(hosts[:split], hosts[split:])


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    kind = draw(st.sampled_from(ENTRY_KINDS))
    config = draw(configs()) if kind == "config" else None
    return Entry(draw(ints), kind, draw(st.binary(max_size=20)), config)


STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    AppendEntries: st.builds(
        AppendEntries, ints, ints, ints, st.lists(entries(), max_size=5).map(tuple), ints
    ),
    AppendReply: st.builds(AppendReply, ints, ints, st.booleans(), st.booleans()),
    RequestVote: st.builds(RequestVote, ints, ints, ints, st.booleans(), st.booleans()),
    VoteReply: st.builds(VoteReply, ints, st.booleans(), st.booleans()),
    Snapshot: st.builds(Snapshot, ints, ints, ints, configs(), st.binary(max_size=50)),
    TimeoutNow: st.builds(TimeoutNow, ints),
}
messages = st.one_of(*STRATEGIES.values())

# One message of each kind with every optional part present, for the refusal tests.
CONFIG = Config(("a", "b", "c"), ("d",))
SAMPLES: list[Message] = [
    AppendEntries(
        5, 7, 4, (Entry(4, "data", b"x"), Entry(5, "config", b"", CONFIG), Entry(5, "took_over")), 6
    ),
    AppendReply(5, 9, True, False),
    RequestVote(5, 9, 4, True, True),
    VoteReply(5, True, True),
    Snapshot(5, 9, 4, CONFIG, b"state"),
    TimeoutNow(5),
]


def refused(value: Any, match: str, codec: ReplicationCodec = DEFAULT_CODEC) -> None:
    with pytest.raises(ReplicationCodecError, match=match) as caught:
        codec.decode(value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


# ---------------------------------------------------------------- round trips


def test_every_kind_has_a_strategy_and_a_sample() -> None:
    assert set(STRATEGIES) == set(MESSAGE_KINDS)
    assert {type(m) for m in SAMPLES} == set(MESSAGE_KINDS)


@given(messages)
def test_every_kind_round_trips(message: Message) -> None:
    value = encode_message(message)
    decoded = decode_message(value)
    assert decoded == message and type(decoded) is type(message)
    assert strictly_equal(encode_message(decoded), value)


@given(messages)
def test_the_plain_value_packs_with_real_msgpack_and_bytes_stay_bytes(message: Message) -> None:
    blob = msgpack.packb(encode_message(message), use_bin_type=True)
    value = msgpack.unpackb(blob, raw=False, strict_map_key=True, use_list=True)
    assert decode_message(value) == message


def test_without_bin_type_bytes_would_arrive_as_strings_and_are_refused() -> None:
    """Why the driver must pack with ``use_bin_type``: else data comes back a str."""
    message = Snapshot(1, 2, 1, CONFIG, b"abc")
    value = msgpack.unpackb(msgpack.packb(encode_message(message), use_bin_type=False), raw=False)
    refused(value, r"snapshot\.data: expected bytes")


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: m.kind)
def test_a_message_travels_as_its_kind_and_its_fields_in_order(message: Message) -> None:
    value = encode_message(message)
    names = [f.name for f in dataclasses.fields(message)]
    assert value[0] == message.kind and len(value) == 1 + len(names)
    for name, field in zip(names, value[1:], strict=True):
        own = getattr(message, name)
        if isinstance(own, Config):
            assert field == [list(own.voters), list(own.learners)]
        elif isinstance(own, tuple):
            assert field == [[e.term, e.kind, e.data, e.config and [
                list(e.config.voters), list(e.config.learners)]] for e in own]  # fmt: skip
        else:
            assert strictly_equal(field, own)


def test_encoding_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not a replication message"):
        encode_message(Entry(1, "data"))


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "value", [None, (), {}, b"append", "append", 3, [], [1, 2], [b"append", 1], ("timeout_now", 1)]
)
def test_what_is_no_kind_and_fields_is_refused(value: Any) -> None:
    refused(value, "message: expected")


@pytest.mark.parametrize("kind", ["nope", "Append", "AppendEntries", "", "timeout-now"])
def test_an_unknown_kind_name_is_refused(kind: str) -> None:
    refused([kind, 1], "unknown replication message kind")


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: m.kind)
def test_one_field_too_few_or_too_many_is_refused(message: Message) -> None:
    value = encode_message(message)
    refused(value[:-1], rf"{message.kind}: expected {len(value) - 1} fields")
    refused([*value, 0], rf"{message.kind}: expected {len(value) - 1} fields")
    refused([value[0]], rf"{message.kind}: expected {len(value) - 1} fields")


def wrong_types(x: Any) -> list[Any]:
    """Values of other types than ``x``'s, as a sloppy or hostile peer sends them."""
    if type(x) is bool:
        return [0, 1, None, "true", 1.0]
    if type(x) is int:
        return [True, False, float(x), str(x), None, b"1", [x]]
    if type(x) is bytes:
        return [x.decode(), list(x), None, 0, bytearray(x)]
    if type(x) is str:
        return [x.encode(), None, 1, [x]]
    if type(x) is list:
        return [tuple(x), None, {}, "x", b"", 0]
    return [1, "x", b"x", True]  # None, an absent config


def places(value: Any, path: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Every field of a message's value and of what it nests, item by item."""
    found = [path] if path else []
    if type(value) is list:
        start = 1 if not path else 0  # the kind is not a field
        for i in range(start, len(value)):
            found += places(value[i], (*path, i))
    return found


def replace_at(value: Any, path: tuple[int, ...], new: Any) -> Any:
    if not path:
        return new
    copy = list(value)
    copy[path[0]] = replace_at(value[path[0]], path[1:], new)
    return copy


def get_at(value: Any, path: tuple[int, ...]) -> Any:
    for i in path:
        value = value[i]
    return value


def field_name(message: Message, path: tuple[int, ...]) -> str:
    """The dotted name the refusal must carry for the field at ``path``."""
    name = f"{message.kind}.{dataclasses.fields(message)[path[0] - 1].name}"
    nested: Any = getattr(message, dataclasses.fields(message)[path[0] - 1].name)
    for i in path[1:]:
        if isinstance(nested, tuple):
            name, nested = f"{name}[]", nested[i]
        else:
            field = dataclasses.fields(nested)[i]
            name, nested = f"{name}.{field.name}", getattr(nested, field.name)
    return name


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: m.kind)
def test_each_field_of_a_wrong_type_is_refused_by_its_name(message: Message) -> None:
    value = encode_message(message)
    assert {path[0] for path in places(value)} == set(range(1, len(value)))  # every field
    for path in places(value):
        name = field_name(message, path)
        for wrong in wrong_types(get_at(value, path)):
            with pytest.raises(ReplicationCodecError) as caught:
                decode_message(replace_at(value, path, wrong))
            text = str(caught.value)
            # The field; or, for a config entry's config gone, the entry whose rule it breaks.
            entry_rule = wrong is None and text.startswith(f"{name.rsplit('.', 1)[0]}: a config")
            assert text.startswith(f"{name}: ") or entry_rule, (name, wrong, text)


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: m.kind)
def test_ints_out_of_range_are_refused_and_the_ends_taken(message: Message) -> None:
    value = encode_message(message)
    int_places = [p for p in places(value) if type(get_at(value, p)) is int]
    assert int_places
    for path in int_places:
        name = re.escape(field_name(message, path))
        for bad in (-1, -(1 << 63), INT_END, (1 << 64) - 1, 1 << 70):
            refused(replace_at(value, path, bad), rf"{name}: expected an integer in \[0, 2\*\*63\)")
        for good in (0, INT_END - 1):
            decoded = decode_message(replace_at(value, path, good))
            assert encode_message(decoded) == replace_at(value, path, good)


def entry_value(*entry: Any) -> list[Any]:
    return ["append", 1, 0, 0, [list(entry)], 0]


@pytest.mark.parametrize("kind", ["Data", "snapshot", "", "data ", 1, None, b"data"])
def test_an_entry_of_an_unknown_kind_is_refused(kind: Any) -> None:
    refused(entry_value(1, kind, b"", None), r"append\.entries\[\]\.kind: expected one of")


def test_a_config_entry_without_its_config_is_refused() -> None:
    refused(entry_value(1, "config", b"", None), r"append\.entries\[\]: a config entry carries")
    with pytest.raises(ValueError, match="a config entry carries"):
        Entry(1, "config")


@pytest.mark.parametrize("kind", ["data", "took_over"])
def test_an_entry_of_another_kind_with_a_config_is_refused(kind: str) -> None:
    config = [["a"], []]
    refused(entry_value(1, kind, b"", config), r"append\.entries\[\]: a config entry carries")
    with pytest.raises(ValueError, match="a config entry carries"):
        Entry(1, kind, b"", Config(("a",)))


@pytest.mark.parametrize(
    ("voters", "learners", "match"),
    [
        (["b", "a"], [], "voters must be sorted and distinct"),
        (["a", "a"], [], "voters must be sorted and distinct"),
        (["a"], ["c", "b"], "learners must be sorted and distinct"),
        (["a"], ["b", "b"], "learners must be sorted and distinct"),
        (["a", "b"], ["b"], "a voter or a learner, not both"),
        ([""], [], r"voters\[\]: expected a host id"),
        (["a"], [b"b"], r"learners\[\]: expected a host id"),
        ("ab", [], r"voters: expected a list"),
    ],
)
def test_a_configuration_breaking_its_rules_is_refused(
    voters: Any, learners: Any, match: str
) -> None:
    refused(["snapshot", 1, 1, 1, [voters, learners], b""], rf"snapshot\.config.*{match}")
    refused(entry_value(1, "config", b"", [voters, learners]), match)


# ---------------------------------------------------------------- limits


def test_the_limits_have_their_documented_defaults() -> None:
    assert CodecLimits() == CodecLimits(
        entries_max=65_536, data_bytes_max=16 * 1024 * 1024, hosts_max=64, host_id_chars_max=256
    )
    assert DEFAULT_CODEC.limits == CodecLimits()
    assert INT_END == 2**63


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(CodecLimits)])
def test_a_limit_below_one_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be at least 1"):
        CodecLimits(**{name: 0})


def test_entries_per_append_hold_at_the_limit_and_refuse_one_more() -> None:
    entry = [1, "took_over", b"", None]
    most = CodecLimits().entries_max
    taken = DEFAULT_CODEC.decode(["append", 1, 0, 0, [entry] * most, 0])
    assert isinstance(taken, AppendEntries) and len(taken.entries) == most
    refused(["append", 1, 0, 0, [entry] * (most + 1), 0], rf"more than entries_max \({most}\)")
    small = ReplicationCodec(CodecLimits(entries_max=2))
    small.decode(["append", 1, 0, 0, [entry] * 2, 0])
    refused(["append", 1, 0, 0, [entry] * 3, 0], r"append\.entries: 3 items", small)


def test_data_bytes_hold_at_the_limit_and_refuse_one_more() -> None:
    most = CodecLimits().data_bytes_max
    at, past = b"x" * most, b"x" * (most + 1)
    DEFAULT_CODEC.decode(["snapshot", 1, 1, 1, [["a"], []], at])
    refused(["snapshot", 1, 1, 1, [["a"], []], past], rf"snapshot\.data: .*\({most}\)")
    DEFAULT_CODEC.decode(entry_value(1, "data", at, None))
    refused(entry_value(1, "data", past, None), r"entries\[\]\.data: .*data_bytes_max")
    small = ReplicationCodec(CodecLimits(data_bytes_max=3))
    small.decode(entry_value(1, "data", b"abc", None))
    refused(entry_value(1, "data", b"abcd", None), r"data_bytes_max \(3\)", small)


def test_hosts_per_configuration_list_hold_at_the_limit_and_refuse_one_more() -> None:
    most = CodecLimits().hosts_max
    hosts = sorted(f"h{i:03}" for i in range(most + 1))
    DEFAULT_CODEC.decode(["snapshot", 1, 1, 1, [hosts[:most], []], b""])
    DEFAULT_CODEC.decode(["snapshot", 1, 1, 1, [["a"], hosts[:most]], b""])
    refused(["snapshot", 1, 1, 1, [hosts, []], b""], rf"voters: .*hosts_max \({most}\)")
    refused(["snapshot", 1, 1, 1, [["a"], hosts], b""], rf"learners: .*hosts_max \({most}\)")


def test_host_id_chars_hold_at_the_limit_and_refuse_one_more() -> None:
    most = CodecLimits().host_id_chars_max
    DEFAULT_CODEC.decode(["snapshot", 1, 1, 1, [["h" * most], []], b""])
    refused(["snapshot", 1, 1, 1, [["h" * (most + 1)], []], b""], rf"host_id_chars_max \({most}\)")
    small = ReplicationCodec(CodecLimits(host_id_chars_max=2))
    refused(["snapshot", 1, 1, 1, [["abc"], []], b""], r"voters\[\]: .*\(2\)", small)


# ---------------------------------------------------------------- derivation


def test_a_new_kind_is_one_class(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass(frozen=True, slots=True)
    class Ping:
        kind: ClassVar[str] = "ping"
        term: int
        config: Config | None
        hosts: tuple[str, ...]

    monkeypatch.setattr(codec_module, "MESSAGE_KINDS", (*MESSAGE_KINDS, Ping))
    codec = ReplicationCodec()
    ping = Ping(3, None, ("a", "b"))
    assert codec.encode(ping) == ["ping", 3, None, ["a", "b"]]
    assert codec.decode(["ping", 3, None, ["a", "b"]]) == ping
    refused(["ping", 3, [["a"], []], ["a", 1]], r"ping\.hosts\[\]: expected a host id", codec)


def test_a_field_the_codec_cannot_check_fails_at_derivation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @dataclass(frozen=True, slots=True)
    class Floaty:
        kind: ClassVar[str] = "floaty"
        ratio: float

    @dataclass(frozen=True, slots=True)
    class Unbounded:
        kind: ClassVar[str] = "unbounded"
        terms: tuple[int, ...]

    for cls, match in ((Floaty, "no replication codec for"), (Unbounded, "no limit on a tuple")):
        monkeypatch.setattr(codec_module, "MESSAGE_KINDS", (*MESSAGE_KINDS, cls))
        with pytest.raises(TypeError, match=match):
            ReplicationCodec()


def test_two_classes_of_one_kind_fail_at_derivation(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass(frozen=True, slots=True)
    class Twin:
        kind: ClassVar[str] = "vote"
        term: int

    monkeypatch.setattr(codec_module, "MESSAGE_KINDS", (*MESSAGE_KINDS, Twin))
    with pytest.raises(TypeError, match="needs a kind of its own"):
        ReplicationCodec()


# ---------------------------------------------------------------- fuzz


def taken_or_refused(value: Any) -> None:
    """Garbage is a message (and then exactly what it encodes to) or the one error."""
    try:
        message = decode_message(value)
    except ReplicationCodecError:
        return
    assert strictly_equal(encode_message(message), value)


# A leaf of the same type as the sample's (a string is an entry's kind there), or now
# and then anything: often valid, often not in one place only.
SAME_TYPE: dict[type, list[Any]] = {
    int: [0, 1, 7, INT_END - 1],
    bool: [True, False],
    bytes: [b"", b"x"],
    str: [*ENTRY_KINDS],
    type(None): [None, [["a"], []]],  # a configuration, or none, whatever the entry's kind
}
leaves = st.sampled_from([0, -1, INT_END, True, None, b"", "", "a", 1.0, [], {}])


@st.composite
def shaped(draw: st.DrawFn) -> Any:
    """A message's value with every leaf redrawn and its hosts in any order, any number."""

    def redraw(x: Any) -> Any:
        if type(x) is list and x and all(type(h) is str for h in x):  # a configuration's hosts
            return draw(st.lists(st.sampled_from("abcd"), max_size=4))
        if type(x) is list:
            return [redraw(item) for item in x]
        if draw(st.integers(0, 9)) == 0:
            return draw(leaves)
        return draw(st.sampled_from(SAME_TYPE[type(x)]))

    value = draw(st.sampled_from([encode_message(m) for m in SAMPLES]))
    return [value[0], *redraw(value[1:])]


kinds = st.sampled_from([cls.kind for cls in MESSAGE_KINDS])
garbage = (
    values
    | st.tuples(kinds, st.lists(values, max_size=7)).map(lambda t: [t[0], *t[1]])
    | st.sampled_from([encode_message(m) for m in SAMPLES]).flatmap(mutate)
    | messages.map(encode_message).flatmap(mutate)
    | shaped()
)


@settings(max_examples=10 * settings.default.max_examples)  # cheap: ten times the profile's
@given(garbage)
def test_garbage_is_a_message_or_the_one_error(value: Any) -> None:
    taken_or_refused(value)
    taken_or_refused(normalise(value))  # what the same value is after real msgpack
