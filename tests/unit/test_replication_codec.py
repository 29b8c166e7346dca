"""The replication codec (skueue/replication/codec.py): every message round-trips through
msgpack, and anything else a peer could send becomes one ReplicationCodecError naming
the field, never another exception."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skueue.replication.codec import (
    CONFIG_HOSTS_MAX,
    DATA_BYTES_MAX,
    ENTRIES_PER_MESSAGE_MAX,
    HOST_ID_CHARS_MAX,
    INT_MAX,
    ReplicationCodecError,
    decode_message,
    encode_message,
)
from skueue.replication.config import Config
from skueue.replication.messages import (
    AppendEntries,
    AppendReply,
    Entry,
    Message,
    RequestVote,
    Snapshot,
    TimeoutNow,
    VoteReply,
)

ints = st.integers(0, INT_MAX - 1)
hosts = st.text(min_size=1, max_size=12)
configs = st.builds(
    lambda v, ls: Config.of(v, set(ls) - set(v)),
    st.sets(hosts, min_size=1, max_size=5), st.sets(hosts, max_size=3))
entries = st.one_of(
    st.builds(Entry, ints, st.just("data"), st.binary(max_size=40)),
    st.builds(Entry, ints, st.just("took_over")),
    st.builds(lambda t, c: Entry(t, "config", config=c), ints, configs),
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(AppendEntries, ints, ints, ints, st.lists(entries, max_size=5).map(tuple), ints),
    st.builds(AppendReply, ints, ints, st.booleans(), st.booleans()),
    st.builds(RequestVote, ints, ints, ints, st.booleans(), st.booleans()),
    st.builds(VoteReply, ints, st.booleans(), st.booleans()),
    st.builds(Snapshot, ints, ints, ints, configs, st.binary(max_size=40)),
    st.builds(TimeoutNow, ints),
)


def _packed(value: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False)


@given(messages)
def test_every_message_round_trips_through_msgpack(message: Message) -> None:
    assert decode_message(_packed(encode_message(message))) == message


GOOD_ENTRY = [3, "data", b"x", None]
GOOD_CONFIG = [["a", "b", "c"], []]


@pytest.mark.parametrize(("value", "names"), [
    (None, "not a replication message"),
    ([], "not a replication message"),
    (["nope", 1], "unknown replication message kind"),
    ([7, 1], "unknown replication message kind"),
    (["timeout_now"], "0 fields, not 1"),
    (["timeout_now", 1, 2], "2 fields, not 1"),
    (["timeout_now", -1], "timeout_now term"),
    (["timeout_now", INT_MAX], "timeout_now term"),
    (["timeout_now", True], "timeout_now term"),
    (["timeout_now", 1.0], "timeout_now term"),
    (["vote_reply", 1, 1, False], "vote_reply granted"),
    (["append_reply", 1, 2, False, "yes"], "append_reply counts"),
    (["append", 1, 0, 0, "entries", 0], "append entries"),
    (["append", 1, 0, 0, [[1, "data", b"x"]], 0], "append entries[0]"),
    (["append", 1, 0, 0, [[1, "other", b"x", None]], 0], "append entries[0] kind"),
    (["append", 1, 0, 0, [[1, ["data"], b"x", None]], 0], "append entries[0] kind"),
    (["append", 1, 0, 0, [[1, "data", "text", None]], 0], "append entries[0] data"),
    (["append", 1, 0, 0, [[1, "config", b"", None]], 0], "a config entry, and only one"),
    (["append", 1, 0, 0, [[1, "data", b"", GOOD_CONFIG]], 0], "a config entry, and only one"),
    (["append", 1, 0, 0, [GOOD_ENTRY, [-2, "data", b"", None]], 0], "append entries[1] term"),
    (["snapshot", 1, 2, 1, [["b", "a"], []], b""], "voters must be sorted"),
    (["snapshot", 1, 2, 1, [["a"], ["a"]], b""], "a voter or a learner"),
    (["snapshot", 1, 2, 1, [["a"], [""]], b""], "snapshot config host"),
    (["snapshot", 1, 2, 1, [["a", 3], []], b""], "snapshot config host"),
    (["snapshot", 1, 2, 1, [["a"]], b""], "snapshot config"),
    (["snapshot", 1, 2, 1, GOOD_CONFIG, None], "snapshot data"),
])
def test_each_bad_field_is_refused_by_name(value: Any, names: str) -> None:
    with pytest.raises(ReplicationCodecError, match=names.replace("[", r"\[").replace("]", r"\]")):
        decode_message(value)


def test_the_limits_are_enforced() -> None:
    """Each named limit: the largest value passes, one more is refused."""
    long_host = "h" * HOST_ID_CHARS_MAX
    assert decode_message(["snapshot", 1, 2, 1, [[long_host], []], b""]).config.voters == (
        long_host,)
    with pytest.raises(ReplicationCodecError, match="host id"):
        decode_message(["snapshot", 1, 2, 1, [[long_host + "h"], []], b""])
    many = [f"h{i:03}" for i in range(CONFIG_HOSTS_MAX + 1)]
    assert len(decode_message(["snapshot", 1, 2, 1, [many[:-1], []], b""]).config.voters) == \
        CONFIG_HOSTS_MAX
    with pytest.raises(ReplicationCodecError, match="at most 64"):
        decode_message(["snapshot", 1, 2, 1, [many, []], b""])
    entry = [1, "took_over", b"", None]
    full = ["append", 1, 0, 0, [entry] * ENTRIES_PER_MESSAGE_MAX, 0]
    assert len(decode_message(full).entries) == ENTRIES_PER_MESSAGE_MAX  # type: ignore[union-attr]
    with pytest.raises(ReplicationCodecError, match="append entries"):
        decode_message(["append", 1, 0, 0, [entry] * (ENTRIES_PER_MESSAGE_MAX + 1), 0])
    big = bytes(DATA_BYTES_MAX)
    assert len(decode_message(["snapshot", 1, 2, 1, GOOD_CONFIG, big]).data) == DATA_BYTES_MAX  # type: ignore[union-attr]
    with pytest.raises(ReplicationCodecError, match="snapshot data"):
        decode_message(["snapshot", 1, 2, 1, GOOD_CONFIG, big + b"x"])


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 64), 1 << 64) | st.floats()
    | st.text(max_size=8) | st.binary(max_size=8)
    | st.sampled_from(["append", "append_reply", "vote", "vote_reply", "snapshot",
                       "timeout_now", "data", "config", "took_over"]),
    lambda inner: st.lists(inner, max_size=7) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=30,
)


def _one_field_changed(encoded: list[Any]) -> st.SearchStrategy[list[Any]]:
    """A real message with one of its fields (the kind included) replaced by garbage."""
    return st.integers(0, len(encoded) - 1).flatmap(
        lambda i: plain.map(lambda x: encoded[:i] + [x] + encoded[i + 1:]))


@given(st.one_of(plain, messages.map(encode_message).flatmap(_one_field_changed)))
def test_garbage_decodes_to_a_message_or_the_one_error(value: Any) -> None:
    """Anything msgpack can carry: a message, or ReplicationCodecError (never another
    exception), and what decodes encodes back to the same value."""
    try:
        message = decode_message(value)
    except ReplicationCodecError:
        return
    assert encode_message(message) == value
