"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, as Kafka's
``ScramSaslServer``, ``ScramFormatter`` and ``ScramCredential`` do.

The server keeps, per user, only what RFC 5802 section 3 lets it keep: the salt, the iteration
count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword,
"Server Key"), where SaltedPassword = Hi(password, salt, i) is PBKDF2 with HMAC-H. The exchange:

    client-first  ->  server-first (combined nonce, salt, i)
    client-final  ->  server-final (v=ServerSignature), once H(ClientProof xor ClientSignature)
                      equals StoredKey (compared in constant time)

The final message's nonce must end with the combined nonce (Kafka's check, which admits
librdkafka 2.0's client nonce written twice); the proof covers the final message as sent.

Every failure raises ``SaslAuthenticationError``: Kafka's generic "invalid credentials" text for
an unknown user, a malformed message, a nonce or proof that does not match; the specific text of
Kafka's ``SaslAuthenticationException`` for an authorization id other than the user. A server
that failed stays failed.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Callable, Mapping

from node.kafka.errors import SaslAuthenticationError
from node.kafka.scram_messages import (
    ClientFinalMessage,
    ClientFirstMessage,
    ServerFirstMessage,
    invalid_credentials,
    server_final_message,
    username,
)

DEFAULT_ITERATIONS = 4096       # kafka-configs' default for SCRAM-SHA-256/512 credentials
TOKEN_AUTH_EXTENSION = "tokenauth"   # delegation tokens: not served here


class ScramMechanism(enum.Enum):
    """Kafka's ``ScramMechanism``: the SASL name, the hash and the least iteration count a
    credential may have."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 4096)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 4096)

    def __init__(self, mechanism_name: str, hash_name: str, min_iterations: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.min_iterations = min_iterations

    @classmethod
    def named(cls, name: str) -> ScramMechanism | None:
        """The mechanism called ``name`` (``SCRAM-SHA-256``), or None."""
        return next((m for m in cls if m.mechanism_name == name), None)


@dataclass(frozen=True)
class ScramCredential:
    """What the server stores for one user of one mechanism (Kafka's ``ScramCredential``)."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int


def secure_random_string() -> str:
    """130 random bits in base 36, as Kafka's ``ScramFormatter.secureRandomString`` makes its
    nonces and salts."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = digits[digit] + out
        if value == 0:
            return out


def scram_hmac(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    """HMAC-H of ``data`` with ``key`` (RFC 5802's HMAC)."""
    return hmac.new(key, data, mechanism.hash_name).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes,
                    iterations: int) -> bytes:
    """Hi(password, salt, iterations) (RFC 5802 section 2.2: PBKDF2 with HMAC-H). The password
    is taken as UTF-8 without SASLprep, as Kafka's ``ScramFormatter.normalize`` does."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes,
                                    salted: bytes, iterations: int) -> ScramCredential:
    """The stored credential of a salted password (Kafka's ``generateCredential``)."""
    client_key = scram_hmac(mechanism, salted, b"Client Key")
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = scram_hmac(mechanism, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def generate_credential(mechanism: ScramMechanism, password: str,
                        iterations: int = DEFAULT_ITERATIONS,
                        salt: bytes | None = None) -> ScramCredential:
    """A credential for ``password`` with a fresh random salt (or ``salt``), as
    ``kafka-configs --add-config 'SCRAM-SHA-256=[password=...]'`` stores one."""
    if salt is None:
        salt = secure_random_string().encode("ascii")
    return credential_from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


class ScramServer:
    """The server side of one SCRAM exchange over ``credentials`` (user -> credential of this
    ``mechanism``). ``evaluate`` takes the client's two messages in turn; ``complete`` then
    holds and ``authorization_id`` names the user. ``server_nonce`` makes the server's part of
    the nonce (random; a test passes RFC 7677's). Not thread-safe: one per connection."""

    def __init__(self, mechanism: ScramMechanism, credentials: Mapping[str, ScramCredential],
                 server_nonce: Callable[[], str] = secure_random_string) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._server_nonce = server_nonce
        self._state = "first"
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None
        self._authorization_id: str | None = None

    @property
    def mechanism_name(self) -> str:
        return self.mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        """The authenticated user; ``RuntimeError`` before the exchange completed."""
        if not self.complete or self._authorization_id is None:
            raise RuntimeError("the SCRAM exchange has not completed")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next message ``token``; ``SaslAuthenticationError`` when
        the exchange fails (and every later call fails too)."""
        try:
            if self._state == "first":
                answer = self._first(token)
                self._state = "final"
            elif self._state == "final":
                answer = self._final(token)
                self._state = "complete"
            else:
                raise invalid_credentials(self.mechanism_name,
                                          f"unexpected message in state {self._state}")
            return answer
        except SaslAuthenticationError:
            self._state = "failed"
            self._credential = None
            raise

    def _first(self, token: bytes) -> bytes:
        name = self.mechanism_name
        first = ClientFirstMessage.parse(token, name)
        if first.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise invalid_credentials(name, "delegation tokens are not served")
        user = username(first.sasl_name)
        if user is None:
            raise invalid_credentials(name, f"invalid username {first.sasl_name!r}")
        credential = self._credentials.get(user)
        if credential is None:
            raise invalid_credentials(name, f"no {name} credential for user {user!r}")
        if first.authorization_id and first.authorization_id != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username", mechanism=name, reason="authorization id is not the user")
        if credential.iterations < self.mechanism.min_iterations:
            raise invalid_credentials(
                name, f"iterations {credential.iterations} is less than the minimum "
                      f"{self.mechanism.min_iterations} for {name}")
        self._client_first = first
        self._credential = credential
        self._authorization_id = user
        self._server_first = ServerFirstMessage(first.nonce + self._server_nonce(),
                                                credential.salt, credential.iterations)
        return self._server_first.text().encode("ascii")

    def _final(self, token: bytes) -> bytes:
        name = self.mechanism_name
        final = ClientFinalMessage.parse(token, name)
        assert self._client_first and self._server_first and self._credential
        # Kafka checks the end only: librdkafka 2.0.x sends its own nonce before the combined one
        if not final.nonce.endswith(self._server_first.nonce):
            raise invalid_credentials(name, "invalid client nonce in the final client message")
        auth_message = ",".join((self._client_first.bare, self._server_first.text(),
                                 final.without_proof)).encode("utf-8")
        credential = self._credential
        client_signature = scram_hmac(self.mechanism, credential.stored_key, auth_message)
        if len(final.proof) != len(client_signature):
            raise invalid_credentials(name, "invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, final.proof))
        computed = hashlib.new(self.mechanism.hash_name, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise invalid_credentials(name, "invalid client credentials")
        signature = scram_hmac(self.mechanism, credential.server_key, auth_message)
        self._credential = None
        return server_final_message(signature).encode("ascii")
