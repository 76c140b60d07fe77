"""SASL/PLAIN on the server side (``node.kafka.plain``), with the scenarios of Kafka's
``PlainSaslServerTest`` and a fuzz of the message parser that may raise only
``SaslAuthenticationError``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.kafka.errors import SaslAuthenticationError
from node.kafka.plain import PlainServer, parse_plain_message

USERS = {"userA": "passwordA", "userB": "passwordB"}
INVALID = "Authentication failed: Invalid username or password"


def message(authzid: str, user: str, password: str) -> bytes:
    return f"{authzid}\x00{user}\x00{password}".encode()


def test_no_authorization_id_authenticates_with_an_empty_answer() -> None:
    server = PlainServer(USERS)
    assert server.evaluate(message("", "userA", "passwordA")) == b""
    assert server.complete and server.authorization_id == "userA"


def test_authorization_id_equal_to_the_user_authenticates() -> None:
    assert PlainServer(USERS).evaluate(message("userA", "userA", "passwordA")) == b""


def test_authorization_id_other_than_the_user_is_refused() -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError) as caught:
        server.evaluate(message("userB", "userA", "passwordA"))
    assert "authorization id that is different from username" in str(caught.value)
    assert not server.complete


@pytest.mark.parametrize("authzid,user,password,words", [
    ("", "", "", "Authentication failed: username not specified"),
    ("", "", "p", "Authentication failed: username not specified"),
    ("", "u", "", "Authentication failed: password not specified"),
    ("a", "", "", "Authentication failed: username not specified"),
    ("a", "", "p", "Authentication failed: username not specified"),
    ("a", "u", "", "Authentication failed: password not specified"),
])
def test_empty_tokens_are_refused_in_kafkas_words(authzid: str, user: str, password: str,
                                                  words: str) -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        PlainServer(USERS).evaluate(message(authzid, user, password))
    assert str(caught.value) == words


@pytest.mark.parametrize("data,count", [(b"a\x00u\x00p\x00", 4), (b"\x00u", 2),
                                        (b"a\x00u\x00p\x00q\x00r", 4), (b"", 1)])
def test_a_message_without_three_tokens_is_refused(data: bytes, count: int) -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        PlainServer(USERS).evaluate(data)
    assert str(caught.value) == f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}"


def test_wrong_password_and_unknown_user_fail_with_the_same_words() -> None:
    with pytest.raises(SaslAuthenticationError) as wrong:
        PlainServer(USERS).evaluate(message("", "userA", "passwordB"))
    with pytest.raises(SaslAuthenticationError) as unknown:
        PlainServer(USERS).evaluate(message("", "nobody", "passwordA"))
    assert str(wrong.value) == str(unknown.value) == INVALID
    assert "passwordB" not in str(wrong.value)


def test_a_password_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        PlainServer(USERS).evaluate(b"\x00userA\x00\xffpasswordA")
    assert str(caught.value) == INVALID


def test_a_second_message_after_completion_is_refused() -> None:
    server = PlainServer(USERS)
    server.evaluate(message("", "userA", "passwordA"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(message("", "userB", "passwordB"))
    assert server.authorization_id == "userA"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100) | st.lists(st.text(max_size=12), max_size=5).map(
    lambda parts: "\x00".join(parts).encode()))
def test_fuzzed_plain_messages_raise_only_typed_errors(data: bytes) -> None:
    try:
        authzid, user, password = parse_plain_message(data)
    except SaslAuthenticationError:
        assert data.count(b"\x00") != 2 or not _utf8(data)
    else:
        assert "\x00".join((authzid, user, password)).encode() == data
    server = PlainServer(USERS)
    try:
        server.evaluate(data)
    except SaslAuthenticationError:
        assert not server.complete
    else:
        assert data in (message("", "userA", "passwordA"), message("userA", "userA", "passwordA"))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
