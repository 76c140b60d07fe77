"""Kafka's frames: every request and response is an int32 big-endian size N, then N bytes.

A request frame starts with its header; its first fields are fixed in every header version::

    RequestHeader => api_key: int16 | api_version: int16 | correlation_id: int32 | ...

so ``peek_header`` reads them with ``struct`` before the version of the rest is known (the
header's version follows from the request's version, ``codec``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from node.kafka.errors import InvalidFrameSizeError, MalformedRequestError

SIZE = struct.Struct(">i")                  # frame size, excluding these 4 bytes
HEADER_START = struct.Struct(">hhi")        # api_key, api_version, correlation_id
DEFAULT_SOCKET_REQUEST_MAX_BYTES = 104857600  # Kafka's socket.request.max.bytes


@dataclass(frozen=True, slots=True)
class HeaderStart:
    """The fields every request header version begins with."""

    api_key: int
    api_version: int
    correlation_id: int


def check_frame_size(size: int, limit: int, key: str = "socket.request.max.bytes") -> int:
    """``size`` when it is a frame size Kafka accepts (0 to ``limit``, the setting ``key``),
    else ``InvalidFrameSizeError`` (Kafka's ``NetworkReceive``: negative or above
    ``socket.request.max.bytes``, or ``sasl.server.max.receive.size`` before authentication)."""
    if size < 0 or size > limit:
        raise InvalidFrameSizeError(
            f"request frame of {size} bytes is outside [0, {key}={limit}]",
            size=size, limit=limit)
    return size


def peek_header(frame: bytes | memoryview) -> HeaderStart:
    """The api key, version and correlation id at the start of a request ``frame`` (without its
    size prefix); ``MalformedRequestError`` when the frame is too short to hold them."""
    if len(frame) < HEADER_START.size:
        raise MalformedRequestError(
            f"request frame of {len(frame)} bytes is shorter than a request header",
            api_key=None, api_version=None, reason="short frame")
    return HeaderStart(*HEADER_START.unpack_from(frame, 0))


def frame(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return SIZE.pack(len(payload)) + payload
