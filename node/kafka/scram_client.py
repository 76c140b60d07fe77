"""``ScramClient``: the client side of one SCRAM-SHA-256/512 exchange (RFC 5802), as Kafka's
``ScramSaslClient`` runs it, for the operator tools that authenticate to a SASL listener::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce + server nonce>,s=<salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<ClientKey xor HMAC(StoredKey, AuthMessage)>
    server-final   v=<HMAC(ServerKey, AuthMessage)>, checked here: a server that does not know
                   the password cannot forge it

Every failure (a server nonce that does not extend ours, too few iterations, a malformed message,
the server's error ``e=...``, a wrong server signature) raises ``SaslAuthenticationError``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

from node.kafka.errors import SaslAuthenticationError
from node.kafka.scram import ScramMechanism, salted_password, scram_hmac, secure_random_string
from node.kafka.scram_messages import sasl_name

_SERVER_FIRST = re.compile(r"r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>[A-Za-z0-9+/=]+),"
                           r"i=(?P<iterations>[0-9]+)(?:,.*)?")
_SERVER_FINAL = re.compile(r"(?:v=(?P<signature>[A-Za-z0-9+/=]+)|e=(?P<error>[^,]*))(?:,.*)?")


class ScramClient:
    """One exchange for ``user`` with ``password``: ``first()``, then ``final(server_first)``,
    then ``verify(server_final)``. Not reusable."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce or secure_random_string()
        self._bare = f"n={sasl_name(user)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        name = self.mechanism.mechanism_name
        text = server_first.decode("utf-8", "replace")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise SaslAuthenticationError(f"{name}: invalid server first message {text!r}")
        nonce, iterations = match["nonce"], int(match["iterations"])
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslAuthenticationError(f"{name}: the server nonce does not extend the "
                                          "client's")
        if iterations < self.mechanism.min_iterations:
            raise SaslAuthenticationError(f"{name}: {iterations} iterations, fewer than "
                                          f"{self.mechanism.min_iterations}")
        salted = salted_password(self.mechanism, self._password,
                                 _base64(match["salt"], name, "salt"), iterations)
        client_key = scram_hmac(self.mechanism, salted, b"Client Key")
        stored_key = hashlib.new(self.mechanism.hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = scram_hmac(self.mechanism, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = scram_hmac(self.mechanism, salted, b"Server Key")
        self._server_signature = scram_hmac(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        name = self.mechanism.mechanism_name
        text = server_final.decode("utf-8", "replace")
        match = _SERVER_FINAL.fullmatch(text)
        if match is None or self._server_signature is None:
            raise SaslAuthenticationError(f"{name}: invalid server final message {text!r}")
        if match["error"] is not None:
            raise SaslAuthenticationError(f"{name}: the server refused: {match['error']}")
        if not hmac.compare_digest(_base64(match["signature"], name, "server signature"),
                                   self._server_signature):
            raise SaslAuthenticationError(f"{name}: invalid server signature")


def _base64(text: str, mechanism: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as err:
        raise SaslAuthenticationError(f"{mechanism}: the {what} is not base64: {err}") from None
