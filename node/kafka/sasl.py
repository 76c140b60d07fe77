"""``SaslAuthenticator``: the authentication of one connection to a SASL_PLAINTEXT or SASL_SSL
listener, before any other request is served (Kafka's ``SaslServerAuthenticator``).

States and what each admits (anything else closes the connection without an answer, Kafka's
``IllegalSaslStateException``)::

    HANDSHAKE_OR_VERSIONS_REQUEST  ApiVersions (answered; a valid one moves to HANDSHAKE_REQUEST,
                                   a too-new or invalid one is answered and may be retried),
                                   SaslHandshake
    HANDSHAKE_REQUEST              SaslHandshake
    SaslHandshake                  an enabled mechanism: NONE and the enabled list, then
                                   AUTHENTICATE (v1) or AUTHENTICATE_UNWRAPPED (v0, the tokens
                                   travel as bare size-prefixed frames); another mechanism:
                                   UNSUPPORTED_SASL_MECHANISM with the enabled list, then close
    AUTHENTICATE                   SaslAuthenticate: the mechanism's answer with NONE (session
                                   lifetime 0); a failure: SASL_AUTHENTICATION_FAILED with the
                                   failure's message, then close
    AUTHENTICATE_UNWRAPPED         a token frame; a failure closes without an answer
    COMPLETE                       every request goes to ``KafkaApis``

Kafka answers a wrong request during AUTHENTICATE with that request's own error response before
closing; here it is closed without one (the client sees the connection end either way). Frames
are bounded by ``sasl.server.max.receive.size`` until the connection is authenticated (the
server applies it).
"""

from __future__ import annotations

import enum
import logging

from kio.schema.errors import ErrorCode

from node.kafka.api_versions import handle_api_versions
from node.kafka.apis import Reply
from node.kafka.codec import (
    ApiVersionsTooNew,
    Request,
    api_versions_unsupported,
    decode_request,
    encode_response,
)
from node.kafka.credentials import CredentialCache, SaslServer
from node.kafka.errors import IllegalSaslStateError, KafkaProtocolError, SaslAuthenticationError
from node.kafka.framing import frame as framed
from node.kafka.framing import peek_header
from node.kafka.sasl_handshake import authenticate_response, handshake_response
from node.kafka.versions import ApiKey

log = logging.getLogger(__name__)


class SaslState(enum.Enum):
    """Where a connection's authentication stands (Kafka's ``SaslState``)."""

    HANDSHAKE_OR_VERSIONS_REQUEST = "handshake or versions request"
    HANDSHAKE_REQUEST = "handshake request"
    AUTHENTICATE = "authenticate"
    AUTHENTICATE_UNWRAPPED = "authenticate unwrapped"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslAuthenticator:
    """Authenticates one connection against ``credentials``; ``handle`` takes each of its
    frames until ``complete``. ``peer`` names the connection in the log. Not thread-safe: owned
    by the connection's task."""

    def __init__(self, credentials: CredentialCache, peer: object = None) -> None:
        self._credentials = credentials
        self._peer = peer
        self._state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self._server: SaslServer | None = None

    @property
    def state(self) -> SaslState:
        return self._state

    @property
    def complete(self) -> bool:
        return self._state is SaslState.COMPLETE

    @property
    def principal(self) -> str:
        """The authenticated user; ``RuntimeError`` before authentication completed."""
        if not self.complete or self._server is None:
            raise RuntimeError("the connection is not authenticated")
        return self._server.authorization_id

    def handle(self, frame: bytes) -> Reply:
        """The reply to one frame of an unauthenticated connection. Raises
        ``KafkaProtocolError`` (``IllegalSaslStateError`` among them) when the connection must
        be closed without an answer; a reply with ``close`` set ends it after the answer."""
        try:
            if self._state in (SaslState.HANDSHAKE_OR_VERSIONS_REQUEST,
                               SaslState.HANDSHAKE_REQUEST):
                return self._handshake_stage(frame)
            if self._state is SaslState.AUTHENTICATE:
                return self._authenticate(frame)
            if self._state is SaslState.AUTHENTICATE_UNWRAPPED:
                return self._unwrapped_token(frame)
        except KafkaProtocolError:
            self._state = SaslState.FAILED
            raise
        raise IllegalSaslStateError(f"no frame is expected in SASL state {self._state.value}",
                                    api_key=None, state=self._state.value)

    # ---- stages ------------------------------------------------------------------------------
    def _handshake_stage(self, frame: bytes) -> Reply:
        key = peek_header(frame).api_key
        if key not in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE) or (
                key == ApiKey.API_VERSIONS
                and self._state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST):
            raise IllegalSaslStateError(
                f"unexpected Kafka request of API key {key} during SASL handshake (state "
                f"{self._state.value})", api_key=key, state=self._state.value)
        request = decode_request(frame)
        if isinstance(request, ApiVersionsTooNew):
            return Reply(api_versions_unsupported(request))
        if key == ApiKey.API_VERSIONS:
            body = handle_api_versions(request)
            if body.error_code == ErrorCode.none:
                self._state = SaslState.HANDSHAKE_REQUEST
            return Reply(encode_response(request, key, body))
        return self._handshake(request)

    def _handshake(self, request: Request) -> Reply:
        mechanisms = self._credentials.mechanisms
        server = self._credentials.server(request.body.mechanism)
        if server is None:
            log.info("closing the connection from %s: SASL mechanism %r is not enabled",
                     self._peer, request.body.mechanism)
            self._state = SaslState.FAILED
            body = handshake_response(request, ErrorCode.unsupported_sasl_mechanism, mechanisms)
            return Reply(encode_response(request, ApiKey.SASL_HANDSHAKE, body), close=True)
        self._server = server
        self._state = (SaslState.AUTHENTICATE if request.api_version >= 1
                       else SaslState.AUTHENTICATE_UNWRAPPED)
        body = handshake_response(request, ErrorCode.none, mechanisms)
        return Reply(encode_response(request, ApiKey.SASL_HANDSHAKE, body))

    def _authenticate(self, frame: bytes) -> Reply:
        key = peek_header(frame).api_key
        if key != ApiKey.SASL_AUTHENTICATE:
            raise IllegalSaslStateError(
                f"unexpected Kafka request of API key {key} during SASL authentication",
                api_key=key, state=self._state.value)
        request = decode_request(frame)
        assert isinstance(request, Request) and self._server is not None
        try:
            token = self._server.evaluate(bytes(request.body.auth_bytes))
        except SaslAuthenticationError as err:
            self._failed(err)
            body = authenticate_response(request, ErrorCode.sasl_authentication_failed, str(err))
            return Reply(encode_response(request, key, body), close=True)
        self._check_complete()
        body = authenticate_response(request, ErrorCode.none, None, token)
        return Reply(encode_response(request, key, body))

    def _unwrapped_token(self, frame: bytes) -> Reply:
        assert self._server is not None
        try:
            token = self._server.evaluate(bytes(frame))
        except SaslAuthenticationError as err:
            self._failed(err)
            return Reply(None, close=True)
        self._check_complete()
        return Reply(framed(token))

    def _check_complete(self) -> None:
        assert self._server is not None
        if self._server.complete:
            self._state = SaslState.COMPLETE
            log.info("authenticated the connection from %s as %r with SASL/%s", self._peer,
                     self._server.authorization_id, self._server.mechanism_name)

    def _failed(self, err: SaslAuthenticationError) -> None:
        self._state = SaslState.FAILED
        log.info("closing the connection from %s: SASL/%s authentication failed: %s",
                 self._peer, getattr(err, "mechanism", "?"), getattr(err, "reason", err))
