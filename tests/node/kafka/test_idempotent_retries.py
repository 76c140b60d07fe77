"""Idempotence under retries with a real client: a proxy loses the response to the first
Produce, librdkafka retries the same batch on a new connection, and the log holds it once (the
retry is answered with the original offsets, as Kafka answers a duplicate)."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer
from node.logdir import LogDir
from tests.node.kafka.clients import consume, consumer, produce_all, producer

PRODUCE = 0


class LosingProxy:
    """Forwards connections to ``target``; the first time a Produce request passes, the
    connection is cut after the request reached the server, so its response is lost."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.cut = threading.Event()
        self.produce_requests = 0
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._stop = False

    def start(self, target: tuple[str, int]) -> None:
        self.target = target
        self._spawn(self._accept)

    def close(self) -> None:
        self._stop = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)     # wakes the thread blocked in accept
        except OSError:
            pass
        self.listener.close()
        for s in self._sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        for t in self._threads:
            t.join(5)

    def _spawn(self, fn, *args) -> None:
        thread = threading.Thread(target=fn, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            lost = threading.Event()    # this connection's responses are dropped from now on
            self._spawn(self._requests, client, server, lost)
            self._spawn(self._pipe, server, client, lost)

    def _requests(self, client: socket.socket, server: socket.socket,
                  lost: threading.Event) -> None:
        try:
            while True:
                head = _read(client, 4)
                frame = _read(client, struct.unpack(">i", head)[0])
                produce = struct.unpack_from(">h", frame)[0] == PRODUCE
                if produce and not self.cut.is_set():
                    self.cut.set()
                    lost.set()                           # before the server can answer it
                    self.produce_requests += 1
                    server.sendall(head + frame)
                    client.shutdown(socket.SHUT_RDWR)    # the response will find no one
                    return
                server.sendall(head + frame)
                if produce:
                    self.produce_requests += 1
        except OSError:
            pass

    def _pipe(self, source: socket.socket, sink: socket.socket,
              lost: threading.Event) -> None:
        try:
            while (chunk := source.recv(65536)) and not lost.is_set():
                sink.sendall(chunk)
        except OSError:
            pass


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


def test_a_produce_retried_after_a_lost_response_is_stored_once(logdir: LogDir) -> None:
    logdir.create_logs("t", [0])
    proxy = LosingProxy()
    config = KafkaServerConfig(listeners="PLAINTEXT://127.0.0.1:0",
                               advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy.port}")
    with KafkaServer(logdir, config) as server:
        proxy.start(server.address)
        try:
            p = producer(f"127.0.0.1:{proxy.port}", **{
                "enable.idempotence": True, "retry.backoff.ms": 50})
            delivered = produce_all(p, "t", [b"a", b"b", b"c"])
            assert proxy.cut.is_set() and proxy.produce_requests == 2   # sent, then retried
            assert delivered == [(0, 0), (0, 1), (0, 2)]
            assert logdir.log("t", 0).log_end_offset == 3
            c = consumer(server.bootstrap_servers)
            try:
                assert [m.value() for m in consume(c, "t", 3)] == [b"a", b"b", b"c"]
            finally:
                c.close()
        finally:
            proxy.close()
