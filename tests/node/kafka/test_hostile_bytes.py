"""Hostile bytes on the socket: a bad frame size, a garbage body, an unknown API key or an
unsupported version close only that connection, and the server keeps serving the others;
ApiVersions above its range is answered in v0 format with UNSUPPORTED_VERSION (KIP-511)."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED
from tests.node.kafka.conftest import Serve
from tests.node.kafka.wire import WireClient

API_VERSIONS, METADATA = 18, 3


def still_serves(server: KafkaServer) -> bool:
    with WireClient(server.address) as client:
        answer = client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
    return answer.brokers[0].port == server.address[1]


def header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    client_id = b"hostile"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize("data", [
    struct.pack(">i", -1),                                  # negative size
    struct.pack(">i", 104857601),                           # above socket.request.max.bytes
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",       # a TLS ClientHello
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                  # HTTP
    struct.pack(">i", 2) + b"\x00\x03",                     # shorter than a header
    struct.pack(">i", 10) + header(999, 0)[:10],            # unknown API key
    struct.pack(">i", 17) + header(METADATA, 13),           # version above the served range
    struct.pack(">i", 17) + header(0, 2),                   # Produce below kio's floor
    struct.pack(">i", 21) + header(METADATA, 12) + b"\xff\xff\xff\xff",  # body garbage
    framed(header(API_VERSIONS, 3) + b"\x00\x04abc\x021\x01\x09\x01\x00"),  # unknown tag 9
    framed(struct.pack(">hhih", 0, 9, 7, 4) + b"fuzz" + b"\x00\x00"     # Produce v9 whose
           + struct.pack(">hi", -1, 1000) + b"\xff\xff\xff\xff\x0f"),  # array claims 2^32
], ids=["negative", "huge", "tls", "http", "short", "unknown-key", "too-new", "too-old",
        "garbage-body", "unknown-tag", "huge-array"])
def test_a_hostile_frame_closes_only_its_connection(server: KafkaServer, data: bytes) -> None:
    with WireClient(server.address) as hostile, WireClient(server.address) as bystander:
        hostile.send(data)
        assert hostile.is_closed_by_server()
        answer = bystander.call(API_VERSIONS, 3, {"client_software_name": "test",
                                                  "client_software_version": "1"})
        assert answer.error_code == ErrorCode.none
    assert still_serves(server)


def test_socket_request_max_bytes_bounds_a_frame(serve: Serve) -> None:
    server = serve(socket_request_max_bytes="100")
    with WireClient(server.address) as client:
        client.send(struct.pack(">i", 101))
        assert client.is_closed_by_server()
    with WireClient(server.address) as client:
        assert client.call(API_VERSIONS, 0, {}).error_code == ErrorCode.none


def test_api_versions_above_the_range_is_answered_in_v0_format(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        client.send(struct.pack(">i", 17 + 5) + header(API_VERSIONS, 9, 42) + b"junk!")
        frame = client.read_frame()
        correlation_id = struct.unpack_from(">i", frame, 0)[0]
        body, _ = entity_reader(load_response_schema(API_VERSIONS, 0))(frame, 4)
        assert correlation_id == 42
        assert body.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == \
            [(API_VERSIONS, 0, 4)]
        # the connection stays open: the client retries with a version we speak
        assert client.call(API_VERSIONS, 4, {"client_software_name": "x",
                                             "client_software_version": "1"}).error_code == 0


def test_api_versions_lists_exactly_the_served_apis_with_a_v0_header(
        server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        for version in range(5):
            values = {"client_software_name": "strata-test", "client_software_version": "1.0"}
            answer = client.call(API_VERSIONS, version, values)
            assert answer.error_code == ErrorCode.none
            assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == {
                key: (r.min_version, r.max_version) for key, r in SUPPORTED.items()}


def test_api_versions_with_a_bad_software_name_is_invalid_request(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(API_VERSIONS, 3, {"client_software_name": "-bad name-",
                                               "client_software_version": "1"})
    assert answer.error_code == ErrorCode.invalid_request
    assert answer.api_keys == ()


def test_pipelined_requests_are_answered_in_order(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        sent = []
        for i in range(20):
            version = i % 5
            correlation, data = client.request_bytes(API_VERSIONS, version, {
                "client_software_name": "p", "client_software_version": "1"})
            sent.append((correlation, version))
            client.send(data)
        for correlation, version in sent:
            assert client.read_response(API_VERSIONS, version, correlation).error_code == 0
