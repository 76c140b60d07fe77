"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) responses.

During authentication ``sasl.SaslAuthenticator`` answers them. Once a connection is
authenticated, or on a PLAINTEXT listener, they reach ``KafkaApis`` and get what Kafka's
``KafkaApis`` answers: ILLEGAL_SASL_STATE (re-authentication, KIP-368, is not served; the
session lifetime given at authentication is 0, which tells clients not to try).
"""

from __future__ import annotations

import datetime
from typing import Any, Sequence

from kio.schema.errors import ErrorCode
from kio.static.primitive import i64Timedelta

from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.versions import ApiKey

NO_SESSION_LIFETIME = i64Timedelta.parse(datetime.timedelta(0))
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def handshake_response(request: Request, error: ErrorCode, mechanisms: Sequence[str]) -> Any:
    """The SaslHandshake response to ``request``: ``error`` and the enabled ``mechanisms``."""
    return build(response_class(ApiKey.SASL_HANDSHAKE, request.api_version),
                 {"error_code": error, "mechanisms": list(mechanisms)})


def authenticate_response(request: Request, error: ErrorCode, message: str | None,
                          auth_bytes: bytes = b"") -> Any:
    """The SaslAuthenticate response to ``request``; session lifetime 0 (no re-authentication)."""
    return build(response_class(ApiKey.SASL_AUTHENTICATE, request.api_version), {
        "error_code": error, "error_message": message, "auth_bytes": auth_bytes,
        "session_lifetime": NO_SESSION_LIFETIME})


def handle_sasl_handshake(served: ServedDir, request: Request) -> Any:
    """SaslHandshake on an authenticated or PLAINTEXT connection: ILLEGAL_SASL_STATE."""
    return handshake_response(request, ErrorCode.illegal_sasl_state, [])


def handle_sasl_authenticate(served: ServedDir, request: Request) -> Any:
    """SaslAuthenticate on an authenticated or PLAINTEXT connection: ILLEGAL_SASL_STATE."""
    return authenticate_response(request, ErrorCode.illegal_sasl_state, AFTER_AUTHENTICATION)
