"""A SASL_PLAINTEXT listener on the wire, as Kafka's ``SaslServerAuthenticator`` and its
``SaslAuthenticatorTest`` have it: ApiVersions and the SASL exchange are all an unauthenticated
connection gets; any other request, a second ApiVersions, a garbage frame or an oversized one
closes it; a wrong password is answered with SASL_AUTHENTICATION_FAILED and then closed; an
unknown mechanism with UNSUPPORTED_SASL_MECHANISM and the enabled list; the legacy unwrapped
tokens after SaslHandshake v0 work; other connections are never affected."""

from __future__ import annotations

import os
import struct
import time
import uuid
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from node.kafka.apis import Reply
from node.kafka.config import KafkaServerConfig
from node.kafka.credentials import CredentialCache
from node.kafka.errors import KafkaProtocolError
from node.kafka.scram import ScramMechanism
from node.kafka.sasl import SaslAuthenticator, SaslState
from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED, ApiKey
from tests.node.kafka.test_scram import client_final
from tests.node.kafka.conftest import Serve
from tests.node.kafka.wire import WireClient, encode_request

JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
PROPERTIES = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    JAAS_KEY: 'org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";',
    "strata.sasl.scram.users": "carol:carol-secret",
}
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
SaslServe = Callable[..., KafkaServer]


@pytest.fixture
def serve_sasl(serve: Serve) -> SaslServe:
    """``serve_sasl(**overrides)``: a SASL_PLAINTEXT server over ``logdir`` (PLAIN user alice,
    SCRAM user carol), closed at teardown."""
    return lambda **overrides: serve(dotted={**PROPERTIES, **overrides})


@pytest.fixture
def sasl_server(serve_sasl: SaslServe) -> KafkaServer:
    return serve_sasl()


def handshake(client: WireClient, mechanism: str, version: int = 1) -> Any:
    return client.call(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(client: WireClient, token: bytes, version: int = 2) -> Any:
    return client.call(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def plain_token(user: str = "alice", password: str = "alice-secret") -> bytes:
    return f"\x00{user}\x00{password}".encode()


def serves_metadata(client: WireClient, port: int) -> bool:
    answer = client.call(ApiKey.METADATA, 12, METADATA_ALL)
    return answer.brokers[0].port == port


def still_serves(server: KafkaServer) -> bool:
    """A fresh connection authenticates with PLAIN and is served Metadata."""
    with WireClient(server.address) as client:
        handshake(client, "PLAIN")
        assert authenticate(client, plain_token()).error_code == ErrorCode.none
        return serves_metadata(client, server.address[1])


def test_api_versions_is_answered_before_authentication_and_lists_the_sasl_apis(
        sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        answer = client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "wire",
                                                      "client_software_version": "1"})
        served = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert served[ApiKey.SASL_HANDSHAKE] == (0, 1)
        assert served[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        assert handshake(client, "PLAIN").error_code == ErrorCode.none


def test_plain_exchange_then_requests_are_served(sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        client.call(ApiKey.API_VERSIONS, 0, {})
        answer = handshake(client, "PLAIN")
        assert answer.error_code == ErrorCode.none
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        done = authenticate(client, plain_token(), version=1)
        assert (done.error_code, done.auth_bytes, done.error_message) == (
            ErrorCode.none, b"", None)
        assert done.session_lifetime.total_seconds() == 0
        assert serves_metadata(client, sasl_server.address[1])


@pytest.mark.parametrize("mechanism", list(ScramMechanism), ids=lambda m: m.mechanism_name)
def test_scram_exchange_then_requests_are_served(sasl_server: KafkaServer,
                                                 mechanism: ScramMechanism) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, mechanism.mechanism_name)
        bare = "n=carol,r=wirenonce"
        server_first = authenticate(client, b"n,," + bare.encode())
        assert server_first.error_code == ErrorCode.none
        assert server_first.auth_bytes.startswith(b"r=wirenonce")
        final, signature = client_final(mechanism, "carol-secret", bare,
                                        server_first.auth_bytes)
        done = authenticate(client, final)
        assert (done.error_code, done.auth_bytes) == (ErrorCode.none, signature)
        assert serves_metadata(client, sasl_server.address[1])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_wrong_password_is_answered_sasl_authentication_failed_then_closed(
        sasl_server: KafkaServer, version: int) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "PLAIN")
        answer = authenticate(client, plain_token(password="wrong"), version=version)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert client.is_closed_by_server()
    assert still_serves(sasl_server)


def test_wrong_scram_password_is_answered_in_kafkas_generic_words_then_closed(
        sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "SCRAM-SHA-512")
        bare = "n=carol,r=abc"
        server_first = authenticate(client, b"n,," + bare.encode())
        final, _ = client_final(ScramMechanism.SCRAM_SHA_512, "wrong", bare,
                                server_first.auth_bytes)
        answer = authenticate(client, final)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == (
            "Authentication failed during authentication due to invalid credentials with SASL "
            "mechanism SCRAM-SHA-512")
        assert client.is_closed_by_server()


def test_unsupported_mechanism_is_answered_with_the_enabled_list_then_closed(
        serve_sasl: SaslServe) -> None:
    server = serve_sasl(**{"sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    with WireClient(server.address) as client:
        answer = handshake(client, "PLAIN")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == ["SCRAM-SHA-256"]
        assert client.is_closed_by_server()


@pytest.mark.parametrize("before", ["nothing", "api_versions", "handshake"])
def test_an_unauthenticated_metadata_request_closes_the_connection(
        sasl_server: KafkaServer, before: str) -> None:
    with WireClient(sasl_server.address) as client:
        if before == "api_versions":
            client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "wire",
                                                 "client_software_version": "1"})
        elif before == "handshake":
            handshake(client, "PLAIN")
        _, request = client.request_bytes(ApiKey.METADATA, 12, METADATA_ALL)
        client.send(request)
        assert client.is_closed_by_server()
    assert still_serves(sasl_server)


def test_a_second_api_versions_closes_the_connection(sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        client.call(ApiKey.API_VERSIONS, 0, {})
        _, request = client.request_bytes(ApiKey.API_VERSIONS, 0, {})
        client.send(request)
        assert client.is_closed_by_server()


def test_api_versions_after_the_handshake_closes_the_connection(
        sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "PLAIN")
        _, request = client.request_bytes(ApiKey.API_VERSIONS, 0, {})
        client.send(request)
        assert client.is_closed_by_server()


def test_a_too_new_api_versions_is_answered_and_may_be_retried(
        sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        client.send(struct.pack(">ihhih", 14, ApiKey.API_VERSIONS, 99, 1, 4) + b"wire")
        assert client.read_frame()[4:6] == struct.pack(">h", ErrorCode.unsupported_version)
        assert client.call(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "wire", "client_software_version": "1"}).api_keys
        assert handshake(client, "PLAIN").error_code == ErrorCode.none


@pytest.mark.parametrize("after_handshake", [False, True])
def test_a_garbage_frame_closes_the_connection(sasl_server: KafkaServer,
                                               after_handshake: bool) -> None:
    with WireClient(sasl_server.address) as client:
        if after_handshake:
            handshake(client, "PLAIN")
        garbage = os.urandom(1024)
        client.send(struct.pack(">i", len(garbage)) + garbage)
        assert client.is_closed_by_server()
    assert still_serves(sasl_server)


def test_garbage_sasl_authenticate_bytes_are_answered_failed_then_closed(
        sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "SCRAM-SHA-256")
        answer = authenticate(client, os.urandom(64))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert client.is_closed_by_server()
    assert still_serves(sasl_server)


def test_a_truncated_sasl_authenticate_closes_the_connection(sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "PLAIN")
        _, request = client.request_bytes(ApiKey.SASL_AUTHENTICATE, 2,
                                          {"auth_bytes": plain_token()})
        client.send(struct.pack(">i", len(request) - 6) + request[4:-2])
        assert client.is_closed_by_server()


def test_a_frame_above_sasl_server_max_receive_size_closes_before_authentication_only(
        serve_sasl: SaslServe, caplog: pytest.LogCaptureFixture) -> None:
    server = serve_sasl(**{"sasl.server.max.receive.size": "1024"})
    with WireClient(server.address) as client:
        handshake(client, "PLAIN")
        _, request = client.request_bytes(ApiKey.SASL_AUTHENTICATE, 2,
                                          {"auth_bytes": plain_token(password="x" * 2048)})
        client.send(request)
        assert client.is_closed_by_server()
    assert "sasl.server.max.receive.size=1024" in caplog.text
    many_topics = {**METADATA_ALL, "topics": [{"name": f"t{i:04d}", "topic_id": uuid.UUID(int=0)}
                                              for i in range(200)]}
    with WireClient(server.address) as client:
        handshake(client, "PLAIN")
        authenticate(client, plain_token())
        _, request = client.request_bytes(ApiKey.METADATA, 12, many_topics)
        assert len(request) > 1024
        assert len(client.call(ApiKey.METADATA, 12, many_topics).topics) == 200


def test_legacy_unwrapped_tokens_after_handshake_v0(sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        assert handshake(client, "SCRAM-SHA-256", version=0).error_code == ErrorCode.none
        bare = "n=carol,r=legacy"
        client.send(struct.pack(">i", len(bare) + 3) + b"n,," + bare.encode())
        server_first = client.read_frame()
        final, signature = client_final(ScramMechanism.SCRAM_SHA_256, "carol-secret", bare,
                                        server_first)
        client.send(struct.pack(">i", len(final)) + final)
        assert client.read_frame() == signature
        assert serves_metadata(client, sasl_server.address[1])
    with WireClient(sasl_server.address) as client:
        handshake(client, "PLAIN", version=0)
        token = plain_token(password="wrong")
        client.send(struct.pack(">i", len(token)) + token)
        assert client.is_closed_by_server()


def test_sasl_requests_after_authentication_get_illegal_sasl_state(
        sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "PLAIN")
        authenticate(client, plain_token())
        assert handshake(client, "PLAIN").error_code == ErrorCode.illegal_sasl_state
        again = authenticate(client, plain_token())
        assert again.error_code == ErrorCode.illegal_sasl_state
        assert again.error_message == (
            "SaslAuthenticate request received after successful authentication")
        assert serves_metadata(client, sasl_server.address[1])


def test_a_plaintext_listener_advertises_and_refuses_the_sasl_apis(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "wire",
                                                      "client_software_version": "1"})
        assert {k.api_key for k in answer.api_keys} == set(SUPPORTED)
        assert handshake(client, "PLAIN").error_code == ErrorCode.illegal_sasl_state
        assert authenticate(client, plain_token()).error_code == ErrorCode.illegal_sasl_state
        assert serves_metadata(client, server.address[1])


def test_describe_configs_hides_the_sasl_passwords(sasl_server: KafkaServer) -> None:
    with WireClient(sasl_server.address) as client:
        handshake(client, "PLAIN")
        authenticate(client, plain_token())
        answer = client.call(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 4, "resource_name": "0",
                           "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    configs = {c.name: c for c in answer.results[0].configs}
    for key in (JAAS_KEY, "strata.sasl.scram.users"):
        assert configs[key].value is None and configs[key].is_sensitive
    assert configs["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


def test_a_failed_connection_stays_open_for_the_delay_then_closes(
        serve_sasl: SaslServe) -> None:
    server = serve_sasl(**{"connection.failed.authentication.delay.ms": "1500"})
    with WireClient(server.address) as client:
        handshake(client, "PLAIN")
        answer = authenticate(client, plain_token(password="wrong"))
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        client.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):      # still open: the client may read the answer
            client.sock.recv(1)
        client.sock.settimeout(5)
        started = time.monotonic()
        assert client.is_closed_by_server()
        assert time.monotonic() - started < 1.5
    instant = serve_sasl(**{"connection.failed.authentication.delay.ms": "0"})
    with WireClient(instant.address) as client:
        handshake(client, "PLAIN")
        authenticate(client, plain_token(password="wrong"))
        client.sock.settimeout(0.5)
        assert client.is_closed_by_server()


CREDENTIALS = CredentialCache.from_config(KafkaServerConfig.from_properties(PROPERTIES))
HANDSHAKE_V1 = encode_request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}, 1, "f")


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.binary(max_size=120) | st.tuples(
    st.sampled_from([ApiKey.SASL_AUTHENTICATE, ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS,
                     ApiKey.METADATA]), st.integers(0, 4), st.binary(max_size=60)).map(
    lambda t: struct.pack(">hhih", t[0], t[1], 2, 1) + b"f" + t[2]))
def test_fuzzed_frames_get_a_reply_or_a_typed_close(after_handshake: bool,
                                                    frame: bytes) -> None:
    authenticator = SaslAuthenticator(CREDENTIALS)
    if after_handshake:
        authenticator.handle(HANDSHAKE_V1[4:])
    try:
        reply = authenticator.handle(frame)
    except KafkaProtocolError:
        assert authenticator.state is SaslState.FAILED
    else:
        assert isinstance(reply, Reply)
        assert not authenticator.complete
