"""Kafka's frames: every request and response is an int32 big-endian size N, then N bytes.

A request frame starts with its header; its first fields are fixed in every header version::

    RequestHeader => api_key: int16 | api_version: int16 | correlation_id: int32 | ...

so ``peek_header`` reads them with ``struct`` before the version of the rest is known (the
header's version follows from the request's version, ``codec``).

``FrameReader`` reads one connection's frames in chunks, so the frames a client has already
sent (librdkafka pipelines up to five requests on a connection) are at hand together
(``ready``) and can be served in one go.
"""

from __future__ import annotations

import asyncio
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


CHUNK = 65536       # bytes asked of the socket at a time


class FrameReader:
    """The request frames of one connection, in order, each without its size prefix. Reads
    the socket in chunks into a buffer of its own: ``next`` waits for a frame, ``ready``
    takes one the buffer already holds without waiting. Each frame's size is checked
    (``check_frame_size``) as soon as its prefix is read, against the limit of the call that
    takes it (a connection's limit changes once it has authenticated)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = bytearray()

    def ready(self, limit: int, key: str = "socket.request.max.bytes") -> bytes | None:
        """The next frame when the buffer holds all of it, else None. Raises
        ``InvalidFrameSizeError`` for a size outside [0, ``limit``]."""
        buffer = self._buffer
        if len(buffer) < SIZE.size:
            return None
        end = SIZE.size + check_frame_size(SIZE.unpack_from(buffer, 0)[0], limit, key)
        if len(buffer) < end:
            return None
        with memoryview(buffer) as view:
            frame = bytes(view[SIZE.size:end])
        del buffer[:end]
        return frame

    async def next(self, limit: int, key: str, idle_s: float) -> bytes | None:
        """The next frame, waiting for it; None when the client closed the connection (in
        the middle of a frame or between frames). Raises ``TimeoutError`` when a frame's size
        prefix did not arrive within ``idle_s``, ``InvalidFrameSizeError`` as ``ready``."""
        buffer = self._buffer
        while (frame := self.ready(limit, key)) is None:
            if len(buffer) < SIZE.size:
                async with asyncio.timeout(idle_s):
                    chunk = await self._reader.read(CHUNK)
            else:       # the rest of a frame of known size: one read
                missing = SIZE.size + SIZE.unpack_from(buffer, 0)[0] - len(buffer)
                try:
                    chunk = await self._reader.readexactly(missing)
                except asyncio.IncompleteReadError:
                    return None
            if not chunk:
                return None
            buffer += chunk
        return frame
