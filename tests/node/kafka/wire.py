"""A raw Kafka protocol client for tests: kio request entities out, kio response entities in,
over one socket with a timeout (a failure is an exception, never a hang)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from node.kafka.codec import build

TIMEOUT_S = 10.0


class WireClient:
    """One connection to a server; ``call`` sends a request and reads its response."""

    def __init__(self, address: tuple[str, int], client_id: str = "wire-test") -> None:
        self.sock = socket.create_connection(address, timeout=TIMEOUT_S)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request_bytes(self, api_key: int, version: int, values: dict[str, Any],
                      correlation_id: int | None = None) -> tuple[int, bytes]:
        """(correlation id, framed request) for ``values`` built as kio's request class."""
        if correlation_id is None:
            self._correlation += 1
            correlation_id = self._correlation
        return correlation_id, encode_request(api_key, version, values, correlation_id,
                                              self.client_id)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        """One response frame without its size; ``ConnectionError`` when the server closed."""
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def read_response(self, api_key: int, version: int, correlation_id: int) -> Any:
        frame = self.read_frame()
        cls = load_response_schema(api_key, version)
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        assert header.correlation_id == correlation_id
        body, _ = entity_reader(cls)(frame, used)
        return body

    def call(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        correlation_id, data = self.request_bytes(api_key, version, values)
        self.send(data)
        return self.read_response(api_key, version, correlation_id)

    def is_closed_by_server(self) -> bool:
        """Whether the server closed this connection (reads EOF within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _read_exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def encode_request(api_key: int, version: int, values: dict[str, Any], correlation_id: int,
                   client_id: str | None) -> bytes:
    """The framed request ``values`` (built as kio's request class of ``api_key`` at
    ``version``) with its header."""
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    header_values = {"request_api_key": api_key, "request_api_version": version,
                     "correlation_id": correlation_id, "client_id": client_id}
    out = io.BytesIO()
    entity_writer(header_cls)(out, build(header_cls, header_values))
    entity_writer(cls)(out, build(cls, values))
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload
