"""SASL/PLAIN (RFC 4616) on the server side, as Kafka's ``PlainSaslServer`` with its
``PlainServerCallbackHandler`` (passwords from the ``user_NAME`` options of the JAAS text).

    message = [authzid] NUL authcid NUL passwd

One message, one empty answer. Errors carry Kafka's words, which the client sees: a message
without exactly three parts, an empty user or password, a wrong user or password (the same
words for both), an authorization id other than the user. Bytes that are not UTF-8 are refused
with the wrong-password words (Kafka reads them as replacement characters, which no configured
password holds).
"""

from __future__ import annotations

import hmac
from typing import Mapping

from node.kafka.errors import SaslAuthenticationError

PLAIN = "PLAIN"


def _failed(message: str, reason: str | None = None) -> SaslAuthenticationError:
    return SaslAuthenticationError(message, mechanism=PLAIN, reason=reason or message)


def parse_plain_message(data: bytes) -> tuple[str, str, str]:
    """(authorization id, user, password) of a PLAIN message; ``SaslAuthenticationError`` when
    it is not UTF-8 or has not exactly three NUL-separated parts."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _failed("Authentication failed: Invalid username or password",
                      f"the PLAIN message is not UTF-8: {err}") from err
    tokens = text.split("\x00", 3)
    if len(tokens) != 3:
        raise _failed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
    return tokens[0], tokens[1], tokens[2]


class PlainServer:
    """The server side of one PLAIN exchange over ``passwords`` (user -> password). Not
    thread-safe: one per connection."""

    mechanism_name = PLAIN

    def __init__(self, passwords: Mapping[str, str]) -> None:
        self._passwords = passwords
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        """The authenticated user; ``RuntimeError`` before the exchange completed."""
        if self._authorization_id is None:
            raise RuntimeError("the PLAIN exchange has not completed")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes:
        """The (empty) answer to the client's message ``token``; ``SaslAuthenticationError``
        when it does not authenticate."""
        if self.complete:
            raise _failed("Authentication failed: unexpected message after completion")
        authorization_id, user, password = parse_plain_message(token)
        if not user:
            raise _failed("Authentication failed: username not specified")
        if not password:
            raise _failed("Authentication failed: password not specified")
        expected = self._passwords.get(user)
        # compare in constant time, and as long for an unknown user as for a known one
        matches = hmac.compare_digest((expected or password + "\x00").encode("utf-8"),
                                      password.encode("utf-8"))
        if expected is None or not matches:
            raise _failed("Authentication failed: Invalid username or password",
                          f"wrong password for user {user!r}" if expected is not None
                          else f"no PLAIN user {user!r}")
        if authorization_id and authorization_id != user:
            raise _failed("Authentication failed: Client requested an authorization id that is "
                          "different from username")
        self._authorization_id = user
        return b""
