"""SCRAM-SHA-256/512 on the server side (``node.kafka.scram``), with the scenarios of Kafka's
``ScramSaslServerTest``, ``ScramFormatterTest`` and ``ScramMessagesTest``: RFC 7677's example
exchange byte for byte, nonce and proof checks, authorization ids, saslname escapes, the message
grammar, and a fuzz of the parsers that may raise only ``SaslAuthenticationError``."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.kafka.errors import SaslAuthenticationError
from node.kafka.scram import (
    ScramCredential,
    ScramMechanism,
    ScramServer,
    generate_credential,
    secure_random_string,
)
from node.kafka.scram_messages import (
    ClientFinalMessage,
    ClientFirstMessage,
    sasl_name,
    username,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
GENERIC = ("Authentication failed during authentication due to invalid credentials with SASL "
           "mechanism SCRAM-SHA-256")

# RFC 7677 section 3
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_C1 = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_S1 = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
          b"i=4096")
RFC_C2 = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
          b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_S2 = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def client_final(mechanism: ScramMechanism, password: str, client_first_bare: str,
                 server_first: bytes, nonce: str | None = None) -> tuple[bytes, bytes]:
    """A client's final message for ``password`` (RFC 5802 section 3, computed here without the
    module under test) and the server signature it must get back."""
    fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
    digest = mechanism.hash_name
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={nonce if nonce is not None else fields['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(stored_key, auth, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    return final, b"v=" + base64.b64encode(hmac.new(server_key, auth, digest).digest())


@pytest.fixture(scope="module")
def users() -> dict[ScramMechanism, dict[str, ScramCredential]]:
    return {m: {"userA": generate_credential(m, "passwordA"),
                "userB": generate_credential(m, "passwordB"),
                "a,b=c": generate_credential(m, "pw")} for m in ScramMechanism}


def first(user: str, authzid: str | None = None, nonce: str = "clientnonce") -> bytes:
    authz = f"a={sasl_name(authzid)}" if authzid is not None else ""
    return f"n,{authz},n={sasl_name(user)},r={nonce}".encode()


def test_rfc7677_example_exchange_is_answered_byte_for_byte() -> None:
    credential = generate_credential(SHA256, "pencil", salt=RFC_SALT)
    server = ScramServer(SHA256, {"user": credential}, server_nonce=lambda: RFC_SERVER_NONCE)
    assert server.evaluate(RFC_C1) == RFC_S1
    assert not server.complete
    assert server.evaluate(RFC_C2) == RFC_S2
    assert server.complete and server.authorization_id == "user"


def test_rfc7677_example_with_another_password_fails() -> None:
    credential = generate_credential(SHA256, "pencil2", salt=RFC_SALT)
    server = ScramServer(SHA256, {"user": credential}, server_nonce=lambda: RFC_SERVER_NONCE)
    server.evaluate(RFC_C1)
    with pytest.raises(SaslAuthenticationError) as caught:
        server.evaluate(RFC_C2)
    assert str(caught.value) == GENERIC and caught.value.reason == "invalid client credentials"
    assert not server.complete


@pytest.mark.parametrize("mechanism", list(ScramMechanism), ids=lambda m: m.mechanism_name)
@pytest.mark.parametrize("user,password", [("userA", "passwordA"), ("a,b=c", "pw")])
def test_exchange_authenticates_and_signs(users, mechanism: ScramMechanism, user: str,
                                          password: str) -> None:
    server = ScramServer(mechanism, users[mechanism])
    c1 = first(user)
    s1 = server.evaluate(c1)
    c2, expected_signature = client_final(mechanism, password, c1.decode()[3:], s1)
    assert server.evaluate(c2) == expected_signature
    assert server.complete and server.authorization_id == user


def test_server_nonce_starts_with_the_client_nonce_and_is_fresh(users) -> None:
    nonces = set()
    for _ in range(3):
        s1 = ScramServer(SHA256, users[SHA256]).evaluate(first("userA", nonce="abc"))
        nonce = s1.decode().split(",")[0][2:]
        assert nonce.startswith("abc") and len(nonce) > len("abc")
        nonces.add(nonce)
    assert len(nonces) == 3


def test_final_message_with_another_nonce_fails(users) -> None:
    server = ScramServer(SHA256, users[SHA256])
    c1 = first("userA")
    s1 = server.evaluate(c1)
    c2, _ = client_final(SHA256, "passwordA", c1.decode()[3:], s1,
                         nonce="clientnonce" + secure_random_string())
    with pytest.raises(SaslAuthenticationError) as caught:
        server.evaluate(c2)
    assert caught.value.reason == "invalid client nonce in the final client message"


def test_final_nonce_ending_with_the_combined_nonce_is_accepted(users) -> None:
    # librdkafka 2.0.x writes the client nonce before the combined one; Kafka admits it
    server = ScramServer(SHA256, users[SHA256])
    c1 = first("userA")
    s1 = server.evaluate(c1)
    combined = s1.decode().split(",")[0][2:]
    c2, signature = client_final(SHA256, "passwordA", c1.decode()[3:], s1,
                                 nonce="clientnonce" + combined)
    assert server.evaluate(c2) == signature and server.complete


def test_wrong_password_and_unknown_user_fail_with_the_same_words(users) -> None:
    server = ScramServer(SHA256, users[SHA256])
    c1 = first("userA")
    c2, _ = client_final(SHA256, "wrong", c1.decode()[3:], server.evaluate(c1))
    with pytest.raises(SaslAuthenticationError) as wrong:
        server.evaluate(c2)
    with pytest.raises(SaslAuthenticationError) as unknown:
        ScramServer(SHA256, users[SHA256]).evaluate(first("nobody"))
    assert str(wrong.value) == str(unknown.value) == GENERIC
    assert "nobody" in unknown.value.reason


def test_a_failed_exchange_stays_failed(users) -> None:
    server = ScramServer(SHA256, users[SHA256])
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(first("nobody"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(first("userA"))
    assert not server.complete
    with pytest.raises(RuntimeError):
        server.authorization_id


def test_authorization_id_equal_to_the_user_is_accepted(users) -> None:
    assert ScramServer(SHA256, users[SHA256]).evaluate(first("userA", authzid="userA"))


def test_authorization_id_other_than_the_user_is_refused_in_kafkas_words(users) -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        ScramServer(SHA256, users[SHA256]).evaluate(first("userA", authzid="userB"))
    assert str(caught.value) == ("Authentication failed: Client requested an authorization id "
                                 "that is different from username")


def test_delegation_token_extension_is_refused(users) -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        ScramServer(SHA256, users[SHA256]).evaluate(first("userA") + b",tokenauth=true")
    assert caught.value.reason == "delegation tokens are not served"


def test_credential_below_the_minimum_iterations_is_refused() -> None:
    weak = generate_credential(SHA256, "pw", iterations=4095)
    with pytest.raises(SaslAuthenticationError) as caught:
        ScramServer(SHA256, {"u": weak}).evaluate(first("u"))
    assert "less than the minimum 4096" in caught.value.reason


def test_credential_keeps_no_password_and_a_fresh_salt() -> None:
    a, b = generate_credential(SHA512, "secret"), generate_credential(SHA512, "secret")
    assert a.salt != b.salt and a.stored_key != b.stored_key and a.iterations == 4096
    assert "secret" not in repr(a) and a.stored_key.hex() not in repr(a)
    assert len(a.stored_key) == len(a.server_key) == 64


@pytest.mark.parametrize("user", ["user1", "123", "1,2", "user=A", "user==B", "user,1",
                                  "user 1", ",", "=", ",=", "=="])
def test_sasl_name_round_trips_commas_and_equals(user: str) -> None:
    name = sasl_name(user)
    assert "," not in name and "=" not in name.replace("=2C", "").replace("=3D", "")
    assert username(name) == user


def test_sasl_name_with_a_bare_equals_names_no_user() -> None:
    assert username("a=b") is None and username("=2") is None


NONCE = "fyko+d2lbbFgONRv9qkxdawL"
VALID_EXTENSIONS = ["ext=val1", "anotherext=name1=value1 name2=another test value \"'!$[]()",
                    "first=val1,second=name1 = value ,third=123"]
INVALID_EXTENSIONS = ["ext1=value", "ext", "ext=value1,value2", "ext=,", "ext =value"]
VALID_RESERVED = ["m=reserved-value", "m=name1=value1 name2=another test value \"'!$[]()"]
INVALID_RESERVED = ["m", "m=name,value", "m=,"]


@pytest.mark.parametrize("text,user,authzid", [
    (f"n,,n=testuser,r={NONCE}", "testuser", ""),
    (f"n,,n=test=2Cuser,r={NONCE}", "test=2Cuser", ""),
    (f"n,,n=test=3Duser,r={NONCE}", "test=3Duser", ""),
    (f"n,a=testauthzid,n=testuser,r={NONCE}", "testuser", "testauthzid"),
    *[(f"n,,{r},n=testuser,r={NONCE}", "testuser", "") for r in VALID_RESERVED],
    *[(f"n,,n=testuser,r={NONCE},{e}", "testuser", "") for e in VALID_EXTENSIONS],
])
def test_valid_client_first_messages_parse(text: str, user: str, authzid: str) -> None:
    message = ClientFirstMessage.parse(text.encode(), "SCRAM-SHA-256")
    assert (message.sasl_name, message.authorization_id, message.nonce) == (user, authzid, NONCE)
    assert text.endswith(message.bare) and message.bare.startswith(("m=", "n="))


def test_client_first_message_extensions_are_read() -> None:
    message = ClientFirstMessage.parse(
        f"n,,n=u,r={NONCE},first=val1,second=name1 = value ,tokenauth=true".encode(), "X")
    assert message.extensions == {"first": "val1", "second": "name1 = value ",
                                  "tokenauth": "true"}


@pytest.mark.parametrize("text", [
    f"n,x=something,n=testuser,r={NONCE}",
    f"y,,n=testuser,r={NONCE}",
    f"p=tls-unique,,n=testuser,r={NONCE}",
    f"n,,n=testuser,r={NONCE},",
    "n,,n=testuser",
    *[f"n,,{r},n=testuser,r={NONCE}" for r in INVALID_RESERVED],
    *[f"n,,n=testuser,r={NONCE},{e}" for e in INVALID_EXTENSIONS],
])
def test_invalid_client_first_messages_are_refused(text: str) -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        ClientFirstMessage.parse(text.encode(), "SCRAM-SHA-256")
    assert str(caught.value) == GENERIC


@pytest.mark.parametrize("extension", ["", *[f",{e}" for e in VALID_EXTENSIONS]])
def test_valid_client_final_messages_parse(extension: str) -> None:
    proof = base64.b64encode(b"proof-bytes").decode()
    text = f"c=biws,r={NONCE}{extension},p={proof}"
    message = ClientFinalMessage.parse(text.encode(), "SCRAM-SHA-256")
    assert (message.channel_binding, message.nonce, message.proof) == (
        b"n,,", NONCE, b"proof-bytes")
    assert message.without_proof == f"c=biws,r={NONCE}{extension}"


@pytest.mark.parametrize("text", [
    f"c=ab,r={NONCE},p=cHJvb2Y=",
    f"c=biws,r={NONCE},p=123",
    f"c=biws,r={NONCE},invalid,p=cHJvb2Y=",
    f"c=biws,r={NONCE}",
    *[f"c=biws,r={NONCE},{e},p=cHJvb2Y=" for e in INVALID_EXTENSIONS],
])
def test_invalid_client_final_messages_are_refused(text: str) -> None:
    with pytest.raises(SaslAuthenticationError):
        ClientFinalMessage.parse(text.encode(), "SCRAM-SHA-256")


FUZZ_USERS = {"user": generate_credential(SHA256, "pencil", salt=RFC_SALT)}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=120).map(str.encode)
       | st.sampled_from([RFC_C1, RFC_C2, b"n,,n=user,r=", b"c=biws,r=x,p=="]).flatmap(
           lambda base: st.binary(max_size=8).map(lambda tail: base + tail)))
def test_fuzzed_scram_tokens_raise_only_typed_errors(token: bytes) -> None:
    for parse in (ClientFirstMessage.parse, ClientFinalMessage.parse):
        try:
            parse(token, "SCRAM-SHA-256")
        except SaslAuthenticationError:
            pass
    as_first = ScramServer(SHA256, FUZZ_USERS, server_nonce=lambda: RFC_SERVER_NONCE)
    as_final = ScramServer(SHA256, FUZZ_USERS, server_nonce=lambda: RFC_SERVER_NONCE)
    as_final.evaluate(RFC_C1)
    for server in (as_first, as_final):
        try:
            server.evaluate(token)
        except SaslAuthenticationError:
            assert not server.complete
