"""The hot-message codec against kio: Produce (v3-11) and Fetch (v4-12) requests encoded by kio
decode to the same values with ours as with kio; Produce and Fetch responses encoded by ours are
byte-identical to kio's; hostile bytes raise only ``MalformedRequestError``, and a mutated frame
is refused exactly when the bounds check and kio refuse it, else decodes to kio's values."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records

from node.kafka.bounds import check_bounds
from node.kafka.codec import build, decode_request
from node.kafka.errors import KafkaProtocolError, MalformedRequestError
from node.kafka.hot_codec import (
    PartitionProduced,
    decode_hot_request,
    encode_hot_response,
    encode_produce_answer,
    produce_response_header,
)

st.register_type_strategy(Records, st.binary(max_size=64))
HOT = [(0, v) for v in range(3, 12)] + [(1, v) for v in range(4, 13)]
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def kio_request_frame(api_key: int, version: int, body: Any, client_id: str | None) -> bytes:
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(out, header_cls(request_api_key=api_key,
                                              request_api_version=version,
                                              correlation_id=7, client_id=client_id))
    entity_writer(cls)(out, body)
    return out.getvalue()


def kio_decode(data: bytes, api_key: int, version: int) -> tuple[Any, Any]:
    cls = load_request_schema(api_key, version)
    header, used = entity_reader(cls.__header_schema__)(data, 0)
    body, _ = entity_reader(cls)(data, used)
    return header, body


def kio_response(body: Any, correlation_id: int) -> bytes:
    header_cls = type(body).__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(out, header_cls(correlation_id=correlation_id))
    entity_writer(type(body))(out, body)
    return out.getvalue()


def with_default_tags(entity: Any) -> Any:
    """``entity`` with every tagged field (at any depth) at its default."""
    if not dataclasses.is_dataclass(entity):
        return entity
    changes = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if "tag" in f.metadata:
            changes[f.name] = f.default
        elif isinstance(value, tuple):
            changes[f.name] = tuple(with_default_tags(item) for item in value)
        elif dataclasses.is_dataclass(value):
            changes[f.name] = with_default_tags(value)
    return dataclasses.replace(entity, **changes)


@pytest.mark.parametrize("api_key,version", HOT)
@SETTINGS
@given(data=st.data(), client_id=st.none() | st.text(max_size=8))
def test_requests_encoded_by_kio_decode_to_kio_values(api_key: int, version: int,
                                                      data: st.DataObject,
                                                      client_id: str | None) -> None:
    body = data.draw(st.from_type(load_request_schema(api_key, version)))
    frame = kio_request_frame(api_key, version, body, client_id)
    header, expected = kio_decode(frame, api_key, version)
    ours_client_id, ours = decode_hot_request(frame, api_key, version)
    assert ours == expected
    assert ours_client_id == header.client_id
    request = decode_request(frame)
    assert (request.body, request.correlation_id) == (expected, 7)


@pytest.mark.parametrize("api_key,version", HOT)
@SETTINGS
@given(data=st.data(), correlation_id=st.integers(-2**31, 2**31 - 1))
def test_responses_encode_byte_identical_to_kio(api_key: int, version: int,
                                                data: st.DataObject, correlation_id: int) -> None:
    body = data.draw(st.from_type(load_response_schema(api_key, version)))
    for entity in (body, with_default_tags(body)):
        assert encode_hot_response(api_key, version, correlation_id, entity) == \
            kio_response(entity, correlation_id)


@pytest.mark.parametrize("api_key,version", HOT)
@SETTINGS
@given(data=st.data())
def test_mutated_or_truncated_requests_raise_only_malformed_request(
        api_key: int, version: int, data: st.DataObject) -> None:
    body = data.draw(st.from_type(load_request_schema(api_key, version)))
    frame = bytearray(kio_request_frame(api_key, version, body, "c"))
    cut = data.draw(st.integers(8, len(frame)))
    for _ in range(data.draw(st.integers(0, 4))):
        frame[data.draw(st.integers(8, len(frame) - 1))] = data.draw(st.integers(0, 255))
    frame = bytes(frame[:cut])
    try:
        decode_hot_request(frame, api_key, version)
    except MalformedRequestError:
        pass


@SETTINGS
@given(garbage=st.binary(max_size=200), version=st.integers(3, 11), key=st.sampled_from([0, 1]))
def test_random_bytes_raise_only_protocol_errors(garbage: bytes, version: int, key: int) -> None:
    version = min(version + key, 12)
    try:
        decode_request(struct.pack(">hhi", key, version, 1) + garbage)
    except KafkaProtocolError:
        pass


@pytest.mark.parametrize("tail", [
    b"\xff\xff\xff\xff\x0f",     # topic array claiming 2^32 - 2 elements
    b"\x02\x7f",                 # one topic whose name claims 126 bytes of the none left
    b"\x02\x02t\xff\xff\xff\xff\x0f",  # one topic whose partition array claims 2^32 - 2
])
def test_a_length_past_the_end_is_refused_before_allocation(tail: bytes) -> None:
    frame = struct.pack(">hhih", 0, 9, 7, 1) + b"c" + b"\x00" + b"\x00" \
        + struct.pack(">hi", -1, 1000) + tail
    with pytest.raises(MalformedRequestError):
        decode_request(frame)


def test_an_unknown_tag_in_a_fetch_request_is_malformed() -> None:
    body = load_request_schema(1, 12)(
        replica_id=-1, max_wait=datetime.timedelta(milliseconds=5),
        min_bytes=1, max_bytes=100, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(), forgotten_topics_data=(), rack_id="")
    frame = kio_request_frame(1, 12, body, "c")
    assert frame.endswith(b"\x00")
    with pytest.raises(MalformedRequestError, match="unknown tagged field 5"):
        decode_hot_request(frame[:-1] + b"\x01\x05\x00", 1, 12)


@pytest.mark.parametrize("api_key,version", HOT)
@SETTINGS
@given(data=st.data())
def test_mutated_requests_decode_as_kio_decodes_them(api_key: int, version: int,
                                                     data: st.DataObject) -> None:
    body = data.draw(st.from_type(load_request_schema(api_key, version)))
    frame = bytearray(kio_request_frame(api_key, version, body, "c"))
    for _ in range(data.draw(st.integers(1, 3))):
        frame[data.draw(st.integers(8, len(frame) - 1))] = data.draw(st.integers(0, 255))
    cls = load_request_schema(api_key, version)
    try:
        check_bounds(cls, bytes(frame), check_bounds(cls.__header_schema__, bytes(frame), 0))
        _, expected = kio_decode(bytes(frame), api_key, version)
    except Exception:
        with pytest.raises(MalformedRequestError):
            decode_hot_request(bytes(frame), api_key, version)
        return
    assert decode_hot_request(bytes(frame), api_key, version)[1] == expected


INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
PRODUCED = st.builds(
    PartitionProduced, index=INT32, error_code=st.sampled_from(list(ErrorCode)),
    base_offset=INT64, log_append_time_ms=st.just(-1) | st.integers(0, 2**41),
    log_start_offset=INT64, error_message=st.none() | st.text(max_size=8),
    record_errors=st.lists(st.tuples(INT32, st.none() | st.text(max_size=8)),
                           max_size=2).map(tuple),
    current_leader=st.none() | st.just((-1, -1)) | st.tuples(INT32, INT32))
ENDPOINTS = st.lists(st.tuples(INT32, st.text(max_size=8), INT32,
                               st.none() | st.text(max_size=4)), max_size=3)


@pytest.mark.parametrize("version", range(3, 12))
@SETTINGS
@given(topics=st.lists(st.tuples(st.text(max_size=8), st.lists(PRODUCED, max_size=3)),
                       max_size=3),
       throttle_ms=st.integers(0, 2**31 - 1), correlation_id=INT32, endpoints=ENDPOINTS)
def test_produce_answers_encode_as_kio_encodes_the_response_built_from_them(
        version: int, topics: list[tuple[str, list[PartitionProduced]]], throttle_ms: int,
        correlation_id: int, endpoints: list[tuple[int, str, int, str | None]]) -> None:
    """Every field, and from v10 KIP-951's tagged current leader and node endpoints (which
    older versions do not carry)."""
    def partition(p: PartitionProduced) -> dict[str, Any]:
        values: dict[str, Any] = {
            "index": p.index, "error_code": p.error_code, "base_offset": p.base_offset,
            "log_append_time": p.log_append_time_ms, "log_start_offset": p.log_start_offset,
            "error_message": p.error_message,
            "record_errors": [{"batch_index": index, "batch_index_error_message": message}
                              for index, message in p.record_errors]}
        if version >= 10 and p.current_leader is not None:
            values["current_leader"] = {"leader_id": p.current_leader[0],
                                        "leader_epoch": p.current_leader[1]}
        return values

    values: dict[str, Any] = {
        "throttle_time": throttle_ms,
        "responses": [{"name": name, "partition_responses": [partition(p) for p in partitions]}
                      for name, partitions in topics]}
    if version >= 10:
        values["node_endpoints"] = [{"node_id": n, "host": h, "port": port, "rack": rack}
                                    for n, h, port, rack in endpoints]
    entity = build(load_response_schema(0, version), values)
    ours = (produce_response_header(version, correlation_id)
            + encode_produce_answer(topics, throttle_ms, version, endpoints))
    assert ours == kio_response(entity, correlation_id)
