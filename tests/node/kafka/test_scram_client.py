"""The client side of SCRAM (an operator tool's): RFC 7677's exchange byte for byte, and every
server answer that must stop it (a nonce not extending the client's, too few iterations, the
server's error, a forged signature, a malformed message)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.kafka.errors import SaslAuthenticationError
from node.kafka.scram import ScramMechanism
from node.kafka.scram_client import ScramClient
from tests.node.kafka.test_scram import RFC_C1, RFC_C2, RFC_S1, RFC_S2

SHA256 = ScramMechanism.SCRAM_SHA_256


def rfc_client() -> ScramClient:
    return ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")


def test_the_exchange_of_rfc_7677_byte_for_byte() -> None:
    client = rfc_client()
    assert client.first() == RFC_C1
    assert client.final(RFC_S1) == RFC_C2
    client.verify(RFC_S2)


@pytest.mark.parametrize("server_first, reason", [
    (b"r=someoneElsesNonce123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
    (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "does not extend"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1024", "fewer than 4096"),
    (b"e=invalid-proof", "invalid server first message"),
    (b"r=rOprNGfwEbeRWgbNEkqOxyz,i=4096", "invalid server first message"),
])
def test_a_server_first_message_that_must_stop_the_exchange(server_first: bytes,
                                                            reason: str) -> None:
    with pytest.raises(SaslAuthenticationError, match=reason):
        rfc_client().final(server_first)


@pytest.mark.parametrize("server_final, reason", [
    (b"e=invalid-proof", "the server refused: invalid-proof"),
    (b"v=" + base64.b64encode(bytes(32)), "invalid server signature"),
    (b"nonsense", "invalid server final message"),
])
def test_a_server_final_message_that_must_fail_the_exchange(server_final: bytes,
                                                            reason: str) -> None:
    client = rfc_client()
    client.final(RFC_S1)
    with pytest.raises(SaslAuthenticationError, match=reason):
        client.verify(server_final)


def test_a_user_name_is_escaped_as_a_saslname() -> None:
    assert ScramClient(SHA256, "a=b,c", "pw", nonce="n0nce").first() == b"n,,n=a=3Db=2Cc,r=n0nce"


@settings(max_examples=300, deadline=None)
@given(server_first=st.binary(max_size=120), server_final=st.binary(max_size=120))
def test_any_server_answer_fails_only_with_an_authentication_error(server_first: bytes,
                                                                   server_final: bytes) -> None:
    client = rfc_client()
    try:
        client.final(server_first)
    except SaslAuthenticationError:
        return
    with pytest.raises(SaslAuthenticationError):
        client.verify(server_final)


@settings(max_examples=300, deadline=None)
@given(salt=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
                    min_size=1, max_size=30),
       signature=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
                         min_size=1, max_size=60))
def test_malformed_base64_in_a_server_message_is_an_authentication_error(
        salt: str, signature: str) -> None:
    client = rfc_client()
    try:
        client.final(f"r=rOprNGfwEbeRWgbNEkqOxyz,s={salt},i=4096".encode())
    except SaslAuthenticationError:
        return
    with pytest.raises(SaslAuthenticationError):
        client.verify(f"v={signature}".encode())
