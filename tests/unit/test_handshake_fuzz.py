"""The handshakes under random input (issue 13's fuzzing, the handshakes' share): a
peer hello, its auth map and a proof of any shape are either taken or refused with
RemoteProtocolError (a proof: False), never anything else, and a proof made with
another key, for other challenges or other ids never checks out."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skueue.core.errors import RemoteProtocolError
from skueue.runtime.network.handshake import parse_peer_hello
from skueue.runtime.security.client_auth import ClientTokens
from skueue.runtime.security.peer_auth import ClusterKeys, generate_key

KEYS = ClusterKeys((bytes.fromhex(generate_key()),))
OTHER = ClusterKeys((bytes.fromhex(generate_key()),))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(),
    st.text(max_size=40), st.binary(max_size=40),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
hellos = st.one_of(
    values,
    st.lists(values, min_size=1, max_size=7).map(lambda x: ["hello-peer", *x]),
    st.tuples(
        st.text(min_size=1, max_size=20), st.text(max_size=30), st.text(max_size=20),
        st.dictionaries(st.sampled_from(["challenge", "proof", "x"]), values, max_size=3),
    ).map(lambda t: ["hello-peer", *t]),
)  # fmt: skip


@given(hellos)
def test_a_peer_hello_of_any_shape_is_taken_or_refused_cleanly(hello: Any) -> None:
    try:
        greeting = parse_peer_hello(hello)
    except RemoteProtocolError:
        return
    assert isinstance(greeting.process, str) and greeting.process
    assert greeting.auth is None or isinstance(greeting.auth, dict)


@given(values)
def test_a_proof_of_any_shape_is_false_not_an_error(proof: Any) -> None:
    assert KEYS.verify(proof, "open", "a", "b", "p", "q") is False


@given(
    st.text(max_size=32), st.text(max_size=32), st.text(min_size=1, max_size=20),
    st.text(min_size=1, max_size=20),
)  # fmt: skip
def test_only_the_same_key_challenges_ids_and_role_check_out(
    mine: str, theirs: str, opener: str, acceptor: str
) -> None:
    proof = KEYS.proof("open", mine, theirs, opener, acceptor)
    assert KEYS.verify(proof, "open", mine, theirs, opener, acceptor)
    assert not OTHER.verify(proof, "open", mine, theirs, opener, acceptor)
    assert not KEYS.verify(proof, "accept", mine, theirs, opener, acceptor)  # reflected
    assert not KEYS.verify(proof, "open", mine + "x", theirs, opener, acceptor)  # replayed
    assert not KEYS.verify(proof, "open", mine, theirs, opener + "x", acceptor)  # moved


@given(values)
def test_a_client_token_of_any_shape_has_no_role_and_raises_nothing(token: Any) -> None:
    tokens = ClientTokens((("client", "c" * 20), ("admin", "a" * 20)))
    assert tokens.role_of(token) is None
    assert tokens.role_of("a" * 20) == "admin"
