"""What a refused client is told (issue 28, item 12): a wrong token once got the same
line as no token (``... or set $SKUEUE_TOKEN``, though it was set), and so did a client
certificate shown to a daemon that does not check client certificates."""

from __future__ import annotations

import pytest

from skueue.runtime.security.client_auth import refusal_message


def message(tokens: bool, certificates: bool, token: bool, cert: bool, tls: bool = True) -> str:
    return refusal_message(
        tokens=tokens, certificates=certificates, token_sent=token, certificate_sent=cert,
        tls=tls,
    )  # fmt: skip


def test_no_token_is_told_to_send_one() -> None:
    said = message(tokens=True, certificates=False, token=False, cert=False, tls=False)
    assert said == (
        "this daemon serves only clients with a token: pass connect(token=...) or set "
        "$SKUEUE_TOKEN"
    )


def test_a_wrong_token_is_told_it_was_refused_not_to_set_one() -> None:
    said = message(tokens=True, certificates=False, token=True, cert=False)
    assert "the token sent was refused" in said and "--client-tokens" in said
    assert "set $SKUEUE_TOKEN" not in said and "serves only clients with" not in said
    assert said != message(tokens=True, certificates=False, token=False, cert=False)


def test_a_certificate_the_daemon_does_not_check_is_said_not_to_count() -> None:
    said = message(tokens=True, certificates=False, token=False, cert=True)
    assert said.startswith("this daemon does not check TLS client certificates (it was "
                           "started without --tls-client-ca), so the one presented does "
                           "not count; ")  # fmt: skip
    assert "serves only clients with a token" in said


def test_over_tls_a_daemon_without_a_client_ca_says_so_to_a_client_that_showed_nothing() -> None:
    """It asks for no certificate without --tls-ca or --tls-client-ca: a client with one
    could not tell otherwise that it was never looked at."""
    said = message(tokens=True, certificates=False, token=False, cert=False, tls=True)
    assert said.endswith("(it does not check TLS client certificates: it has no --tls-client-ca)")


def test_a_token_to_a_daemon_that_takes_only_certificates() -> None:
    said = message(tokens=False, certificates=True, token=True, cert=False)
    assert said.startswith("this daemon takes no tokens (it was started without --client-tokens)")
    assert "serves only clients with a TLS client certificate signed by its --tls-client-ca" in said


@pytest.mark.parametrize("token", [False, True])
def test_a_certificate_not_signed_by_the_client_ca(token: bool) -> None:
    said = message(tokens=True, certificates=True, token=token, cert=True)
    assert "not signed by this daemon's --tls-client-ca" in said
    assert ("was refused" in said) == token


def test_every_combination_is_one_line_and_distinct_where_what_was_shown_differs() -> None:
    seen: dict[str, tuple[bool, ...]] = {}
    for tokens, certificates in ((True, False), (False, True), (True, True)):
        for token in (False, True):
            for cert in (False, True):
                said = message(tokens, certificates, token, cert)
                assert "\n" not in said
                assert said not in seen, (seen.get(said), (tokens, certificates, token, cert))
                seen[said] = (tokens, certificates, token, cert)
