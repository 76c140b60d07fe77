"""``strata groups --command-config``: the group tool reaches an ``SSL`` listener, a ``SASL_SSL``
one (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and a ``SASL_PLAINTEXT`` one with the client
properties Kafka's tools take, and sees the group a real librdkafka consumer committed over the same listener; a wrong
password, an untrusted broker and a misspelt security key are one clear line each, naming what
failed, never the password."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import confluent_kafka as ck
import pytest

from node import LogDir
from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer
from ops.cli.main import main
from tests.node.kafka.certificates import Certificates, make_certificates

DEADLINE_S = 30.0
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="carol" password="{password}";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="{password}";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"))


def broker_of(tmp_path: Path, certs: Certificates, listener: str) -> Iterator[KafkaServer]:
    logdir = LogDir.open(tmp_path / "logs", start_tasks=False)
    logdir.create_logs("orders", [0])
    config = KafkaServerConfig.from_properties({
        "listeners": f"{listener}://127.0.0.1:0", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_pem),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "strata.sasl.scram.users": "carol:carol-secret",
        "group.initial.rebalance.delay.ms": "0"})
    with KafkaServer(logdir, config) as server:
        yield server
    logdir.close()


@pytest.fixture
def ssl_broker(tmp_path: Path, certs: Certificates) -> Iterator[KafkaServer]:
    yield from broker_of(tmp_path, certs, "SSL")


@pytest.fixture
def sasl_ssl_broker(tmp_path: Path, certs: Certificates) -> Iterator[KafkaServer]:
    yield from broker_of(tmp_path, certs, "SASL_SSL")


def commit_as_group(server: KafkaServer, group: str, **security: Any) -> None:
    """A real librdkafka producer and group member over the secured listener: 3 records
    produced, the group commits offset 3 and leaves."""
    producer = ck.Producer({"bootstrap.servers": server.bootstrap_servers, **security})
    for i in range(3):
        producer.produce("orders", value=b"v%d" % i, partition=0)
    assert producer.flush(DEADLINE_S) == 0
    c = ck.Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     **security})
    c.subscribe(["orders"])
    got, deadline = 0, time.monotonic() + DEADLINE_S
    while got < 3 and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
            c.commit(message=message, asynchronous=False)
    c.close()
    assert got == 3


def command_config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def groups(capsys: pytest.CaptureFixture[str], server: KafkaServer, config: str,
           *words: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["groups", *words, "--bootstrap-server", server.bootstrap_servers,
                 "--command-config", config, "--timeout", "10"])
    out, err = capsys.readouterr()
    return code, out, err


def test_groups_describes_a_group_over_ssl(ssl_broker: KafkaServer, certs: Certificates,
                                           tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    commit_as_group(ssl_broker, "billing", **{"security.protocol": "SSL",
                                              "ssl.ca.location": str(certs.ca)})
    config = command_config(tmp_path, f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                                      f"ssl.truststore.location={certs.ca}\n")
    code, out, err = groups(capsys, ssl_broker, config, "describe", "billing", "--json")
    assert code == 0, err
    [document] = json.loads(out)["groups"]
    rows = document["partitions"]
    assert [(r["topic"], r["partition"], r["current_offset"], r["lag"]) for r in rows] == [
        ("orders", 0, 3, 0)]


@pytest.mark.parametrize("mechanism, jaas", [
    ("PLAIN", PLAIN_JAAS.format(password="alice-secret")),
    ("SCRAM-SHA-256", SCRAM_JAAS.format(password="carol-secret")),
    ("SCRAM-SHA-512", SCRAM_JAAS.format(password="carol-secret"))])
def test_groups_lists_a_group_over_sasl_ssl(sasl_ssl_broker: KafkaServer, certs: Certificates,
                                            tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            mechanism: str, jaas: str) -> None:
    commit_as_group(sasl_ssl_broker, "audit", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca),
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol",
        "sasl.password": "carol-secret"})
    config = command_config(tmp_path, "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                                      f"ssl.truststore.location={certs.ca}\n"
                                      f"sasl.mechanism={mechanism}\nsasl.jaas.config={jaas}\n")
    code, out, err = groups(capsys, sasl_ssl_broker, config, "list")
    assert code == 0, err
    assert "audit" in out.split()


def test_groups_lists_a_group_over_sasl_plaintext(tmp_path: Path, certs: Certificates,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for server in broker_of(tmp_path, certs, "SASL_PLAINTEXT"):
        commit_as_group(server, "plain", **{
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"})
        config = command_config(tmp_path, "security.protocol=SASL_PLAINTEXT\n"
                                          "sasl.mechanism=PLAIN\nsasl.jaas.config="
                                          + PLAIN_JAAS.format(password="alice-secret") + "\n")
        code, out, err = groups(capsys, server, config, "list")
        assert code == 0, err
        assert "plain" in out.split()


def test_a_wrong_password_is_one_line_naming_the_broker_without_the_password(
        sasl_ssl_broker: KafkaServer, certs: Certificates, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = command_config(tmp_path, "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
                                      f"ssl.truststore.location={certs.ca}\n"
                                      "sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
                                      + SCRAM_JAAS.format(password="not-carols") + "\n")
    code, out, err = groups(capsys, sasl_ssl_broker, config, "list")
    assert code != 0
    assert "SCRAM-SHA-512 authentication failed" in err
    assert sasl_ssl_broker.bootstrap_servers in err
    assert "not-carols" not in err + out
    assert "Traceback" not in err


def test_a_broker_the_trust_store_does_not_vouch_for_is_refused(
        ssl_broker: KafkaServer, certs: Certificates, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = command_config(tmp_path, f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                                      f"ssl.truststore.location={certs.other_ca}\n")
    code, _, err = groups(capsys, ssl_broker, config, "list")
    assert code != 0
    assert f"TLS with the broker {ssl_broker.bootstrap_servers} failed: " \
           "CERTIFICATE_VERIFY_FAILED" in err


def test_a_misspelt_security_key_is_a_usage_error_naming_file_and_key(
        ssl_broker: KafkaServer, certs: Certificates, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = command_config(tmp_path, f"security.protocol=SSL\nssl.trustore.location={certs.ca}\n")
    code, _, err = groups(capsys, ssl_broker, config, "list")
    assert code == 2
    assert f"--command-config {config}: ssl.trustore.location" in err


def test_a_plaintext_try_on_a_tls_listener_is_told_of_command_config(
        ssl_broker: KafkaServer, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(["groups", "list", "--bootstrap-server", ssl_broker.bootstrap_servers,
                 "--timeout", "10"])
    err = capsys.readouterr().err
    assert code != 0
    assert "the broker closed the connection" in err
    assert "give its client properties with --command-config FILE" in err


def test_a_broker_that_never_answers_the_handshake_is_one_line(
        certs: Certificates, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    config = command_config(tmp_path, f"security.protocol=SSL\nssl.truststore.type=PEM\n"
                                      f"ssl.truststore.location={certs.ca}\n")
    with socket.socket() as silent:                 # accepts, and never speaks TLS
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host, port = silent.getsockname()
        capsys.readouterr()
        code = main(["groups", "list", "--bootstrap-server", f"{host}:{port}",
                     "--command-config", config, "--timeout", "1"])
    err = capsys.readouterr().err
    assert code != 0
    assert f"TLS with the broker {host}:{port} failed: " in err
    assert "Traceback" not in err
