"""The request decoder against arbitrary bytes: it returns a request or raises a
``KafkaProtocolError``, never anything else (an exception escaping it would end a connection
without the server knowing why, or worse)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.kafka.codec import ApiVersionsTooNew, Request, decode_request
from node.kafka.errors import KafkaProtocolError, MalformedRequestError
from node.kafka.versions import SUPPORTED
from tests.node.kafka.wire import encode_request

ROOT = Path(__file__).resolve().parents[3]
SERVED = sorted((key, version) for key, r in SUPPORTED.items()
                for version in range(r.min_version, r.max_version + 1))


def decodes_or_refuses(frame: bytes) -> None:
    try:
        decoded = decode_request(frame)
    except KafkaProtocolError:
        return
    assert isinstance(decoded, Request | ApiVersionsTooNew)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_a_protocol_error(frame: bytes) -> None:
    decodes_or_refuses(frame)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SERVED), st.binary(max_size=300))
def test_a_served_header_with_an_arbitrary_body_decodes_or_raises_a_protocol_error(
        served: tuple[int, int], body: bytes) -> None:
    key, version = served
    client_id = b"fuzz"
    header = struct.pack(">hhih", key, version, 7, len(client_id)) + client_id
    flexible_tags = b"\x00"
    decodes_or_refuses(header + flexible_tags + body)
    decodes_or_refuses(header + body)


def produce_request() -> bytes:
    return encode_request(0, 9, {
        "transactional_id": None, "acks": -1, "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 40}]}]},
        7, "fuzz")[4:]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_produce_request_decodes_or_raises_a_protocol_error(data: st.DataObject
                                                                      ) -> None:
    frame = bytearray(produce_request())
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(frame) - 1))
        frame[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    decodes_or_refuses(bytes(frame[:cut]))


def test_a_truncated_request_is_malformed() -> None:
    frame = produce_request()
    try:
        decode_request(frame[:-5])
    except MalformedRequestError as err:
        assert err.api_key == 0 and err.api_version == 9
    else:
        raise AssertionError("a truncated produce request decoded")


# Produce v9 (flexible): header v2, null transactional id, acks -1, timeout 1000, then a
# topic_data array declaring 2^32 - 2 elements (uvarint 0xFFFFFFFF)
HUGE_ARRAY_PRODUCE = (struct.pack(">hhih", 0, 9, 7, 4) + b"fuzz" + b"\x00" + b"\x00"
                      + struct.pack(">hi", -1, 1000) + b"\xff\xff\xff\xff\x0f")


def test_a_huge_declared_array_length_is_refused_before_it_is_allocated() -> None:
    # in a child process: a reader that allocated the declared length would abort it
    script = (
        "import sys\n"
        "from node.kafka.codec import decode_request\n"
        "from node.kafka.errors import MalformedRequestError\n"
        "try:\n"
        "    decode_request(bytes.fromhex(sys.argv[1]))\n"
        "except MalformedRequestError as err:\n"
        "    print('refused:', err)\n")
    done = subprocess.run([sys.executable, "-c", script, HUGE_ARRAY_PRODUCE.hex()],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: API key 0 version 9" in done.stdout
    assert "array topic_data" in done.stdout


@pytest.mark.parametrize("served", SERVED, ids=[f"{k}v{v}" for k, v in SERVED])
def test_every_served_request_with_huge_lengths_is_refused(served: tuple[int, int]) -> None:
    key, version = served
    header = struct.pack(">hhih", key, version, 7, 4) + b"fuzz"
    for filler in (b"\xff" * 64, b"\x7f\xff\xff\xff" * 16, b"\x00\xff\xff\xff\xff\x0f" * 10):
        decodes_or_refuses(header + b"\x00" + filler)
        decodes_or_refuses(header + filler)
