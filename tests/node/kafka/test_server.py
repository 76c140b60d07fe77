"""The listener's life: ephemeral ports, advertised addresses, a clean stop with a fetch
parked, and a failed bind that leaves nothing running."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kio.schema.errors import ErrorCode

from node.kafka.broker_view import LogDirBrokerView
from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer
from node.kafka.versions import ApiKey
from node.logdir import LogDir
from storage.errors import InvalidConfigError
from tests.node.kafka.conftest import Serve
from tests.node.kafka.wire import WireClient

FETCH, METADATA = 1, 3


def kafka_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kafka-")]


def test_close_ends_a_parked_fetch_and_leaves_no_thread_running(logdir: LogDir) -> None:
    logdir.create_logs("t", [0])
    before = kafka_threads()
    server = KafkaServer(logdir, KafkaServerConfig(listeners="PLAINTEXT://127.0.0.1:0")).start()
    client = WireClient(server.address)
    try:
        _, request = client.request_bytes(FETCH, 12, {
            "max_wait": 30000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}]})
        client.send(request)
        time.sleep(0.2)
        start = time.monotonic()
        server.close()
        assert time.monotonic() - start < 5
        assert client.is_closed_by_server()
    finally:
        client.close()
    assert kafka_threads() == before
    with pytest.raises(OSError):
        socket.create_connection(server.address, timeout=2).close()


def test_a_port_in_use_fails_start_and_leaves_nothing_running(logdir: LogDir) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        before = kafka_threads()
        server = KafkaServer(logdir, KafkaServerConfig(listeners=f"PLAINTEXT://127.0.0.1:{port}"))
        with pytest.raises(OSError):
            server.start()
        assert kafka_threads() == before
    finally:
        taken.close()


def test_metadata_names_the_advertised_listener(logdir: LogDir, serve: Serve) -> None:
    server = serve(advertised_listeners="PLAINTEXT://broker.example:19092")
    with WireClient(server.address) as client:
        answer = client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
    assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(0, "broker.example", 19092)]
    assert server.bootstrap_servers == "broker.example:19092"


def test_listener_settings_are_checked_naming_the_key() -> None:
    with pytest.raises(InvalidConfigError, match="listeners"):
        KafkaServerConfig(listeners="SSH://127.0.0.1:9093")
    with pytest.raises(InvalidConfigError, match="ssl.keystore.location"):
        KafkaServerConfig(listeners="SSL://127.0.0.1:9093")      # TLS without a key store
    with pytest.raises(InvalidConfigError, match="listeners"):
        KafkaServerConfig(listeners="127.0.0.1:9092")
    with pytest.raises(InvalidConfigError, match="no.such.key"):
        KafkaServerConfig.from_properties({"no.such.key": "1"})
    assert KafkaServerConfig().listener().host == "127.0.0.1"      # loopback by default
    assert KafkaServerConfig().auto_create_topics_enable is False


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(serve: Serve) -> None:
    server = serve(connections_max_idle_ms="300")
    with WireClient(server.address) as idle, WireClient(server.address) as busy:
        start = time.monotonic()
        for _ in range(4):                     # requests keep a connection alive
            time.sleep(0.15)
            busy.call(18, 0, {})
        assert idle.is_closed_by_server()
        assert 0.25 <= time.monotonic() - start < 3
        assert busy.call(18, 0, {}).error_code == 0


def test_a_connection_beyond_max_connections_is_closed(serve: Serve) -> None:
    server = serve(max_connections="1")
    with WireClient(server.address) as first:
        assert first.call(18, 0, {}).error_code == 0
        with WireClient(server.address) as second:
            assert second.is_closed_by_server()
        assert first.call(18, 0, {}).error_code == 0
    deadline = time.monotonic() + 5            # the first one's slot frees once it is closed
    while True:
        with WireClient(server.address) as third:
            try:
                assert third.call(18, 0, {}).error_code == 0
                break
            except ConnectionError:
                assert time.monotonic() < deadline, "the slot of a closed connection stayed taken"


class BrokenView(LogDirBrokerView):
    """A broker view whose topic listing fails (a bug behind the boundary)."""

    def topics(self) -> dict[str, int]:
        raise RuntimeError("topic listing failed")


def test_a_failing_request_closes_only_its_connection(logdir: LogDir) -> None:
    config = KafkaServerConfig(listeners="PLAINTEXT://127.0.0.1:0")
    view = BrokenView(logdir, 0, lambda: ("127.0.0.1", 9092))
    with KafkaServer(logdir, config, view=view) as broken:
        with WireClient(broken.address) as failing, WireClient(broken.address) as other:
            _, request = failing.request_bytes(METADATA, 12, {
                "topics": None, "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            failing.send(request)
            assert failing.is_closed_by_server()
            assert other.call(18, 3, {"client_software_name": "x",
                                      "client_software_version": "1"}).error_code == 0


def test_a_listener_on_every_interface_takes_one_port_for_both_families(serve: Serve) -> None:
    """``PLAINTEXT://:0``: one ephemeral port answers on IPv4 and (where the host has it) IPv6
    alike, and the broker advertises this machine's name, as Kafka does for an empty host."""
    server = serve(listeners="PLAINTEXT://:0")
    host, port = server.advertised_address()
    assert host == socket.getfqdn() and port == server.address[1]
    families = [("127.0.0.1", port)]
    if socket.has_ipv6:
        try:
            probe = socket.create_connection(("::1", port), timeout=5)
            probe.close()
            families.append(("::1", port))
        except OSError:
            pass    # no IPv6 loopback on this host
    for address in families:
        with WireClient(address) as client:
            answer = client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                          "client_software_version": "1"})
        assert answer.error_code == ErrorCode.none
