"""Real clients against ``SSL`` and ``SASL_SSL`` listeners: confluent-kafka (librdkafka, which
checks the broker's name against its certificate), kafka-python, aiokafka and kcat produce and
consume over TLS; every key store form Kafka takes serves a handshake; client certificates are
asked for as ``ssl.client.auth`` says (on ``SASL_SSL`` only through its listener-prefixed key,
as Kafka); a client that does not trust the broker, a plaintext client and a TLS 1.2 client on a
TLS 1.3 listener are refused while the listener goes on serving."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
import pytest
from aiokafka.helpers import create_ssl_context
from kafka import KafkaProducer

from node.kafka.server import KafkaServer
from node.logdir import LogDir
from tests.node.kafka.certificates import (KEY_PASSWORD, STORE_PASSWORD, Certificates,
                                           make_certificates)
from tests.node.kafka.clients import (aiokafka_round_trip, consume, consumer,
                                      kafka_python_round_trip, produce_all, producer)
from tests.node.kafka.conftest import Serve

TIMEOUT_S = 15
SCRAM_USERS = "carol:carol-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"))


def pem_keystore(certs: Certificates) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_pem)}


@pytest.fixture
def ssl_server(logdir: LogDir, serve: Serve, certs: Certificates) -> KafkaServer:
    logdir.create_logs("t", [0])
    return serve(dotted={"listeners": "SSL://127.0.0.1:0", **pem_keystore(certs)})


def trusting(certs: Certificates, **extra: Any) -> dict[str, Any]:
    """librdkafka's settings of a client that trusts the test authority."""
    return {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca), **extra}


def metadata_ok(bootstrap: str, **settings: Any) -> bool:
    """Whether a librdkafka admin client gets the cluster's metadata (within 20 s: a success
    comes in milliseconds, even on a loaded machine)."""
    return _metadata(bootstrap, 20, settings)


def refused(bootstrap: str, **settings: Any) -> bool:
    """Whether a librdkafka admin client gets no metadata in 5 s (it retries a failed handshake
    until then)."""
    return not _metadata(bootstrap, 5, settings)


def _metadata(bootstrap: str, timeout_s: float, settings: dict[str, Any]) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000,
                         **settings})
    try:
        return "t" in admin.list_topics(timeout=timeout_s).topics
    except ck.KafkaException:
        return False


def test_confluent_kafka_produces_and_consumes_over_ssl(logdir: LogDir, ssl_server: KafkaServer,
                                                        certs: Certificates) -> None:
    p = producer(ssl_server.bootstrap_servers, **trusting(certs))
    assert produce_all(p, "t", [b"a", b"b", b"c"]) == [(0, 0), (0, 1), (0, 2)]
    c = consumer(ssl_server.bootstrap_servers, **trusting(certs))
    try:
        assert [m.value() for m in consume(c, "t", 3)] == [b"a", b"b", b"c"]
    finally:
        c.close()
    assert logdir.log("t", 0).log_end_offset == 3


def test_kafka_python_produces_and_consumes_over_ssl(ssl_server: KafkaServer,
                                                     certs: Certificates) -> None:
    values = [b"k0", b"k1", b"k2"]
    assert kafka_python_round_trip(ssl_server.bootstrap_servers, "t", values,
                                   security_protocol="SSL", ssl_cafile=str(certs.ca)) == (
        [0, 1, 2], values)


def test_aiokafka_produces_and_consumes_over_ssl(ssl_server: KafkaServer,
                                                 certs: Certificates) -> None:
    values = [b"m0", b"m1", b"m2"]
    assert aiokafka_round_trip(ssl_server.bootstrap_servers, "t", values,
                               security_protocol="SSL",
                               ssl_context=create_ssl_context(cafile=str(certs.ca))) == values


def test_kcat_produces_lists_and_consumes_over_ssl(ssl_server: KafkaServer,
                                                   certs: Certificates) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: run scripts/setup-kcat"
    tls = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={certs.ca}"]
    base = [kcat, "-b", ssl_server.bootstrap_servers, *tls, "-m", "10"]
    produced = subprocess.run([*base, "-P", "-t", "t", "-p", "0"], input="one\ntwo\n",
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    assert produced.returncode == 0, produced.stderr
    listing = subprocess.run([*base, "-L"], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert listing.returncode == 0, listing.stderr
    assert 'topic "t" with 1 partitions' in listing.stdout
    consumed = subprocess.run([*base, "-C", "-t", "t", "-p", "0", "-o", "beginning", "-e"],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two"]


KEYSTORES = {
    "PEM file": lambda c: {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(c.server_pem)},
    "encrypted PEM file": lambda c: {"ssl.keystore.type": "PEM",
                                     "ssl.keystore.location": str(c.server_encrypted_pem),
                                     "ssl.key.password": KEY_PASSWORD},
    "inline PEM": lambda c: {"ssl.keystore.type": "PEM", "ssl.keystore.key": c.server_key,
                             "ssl.keystore.certificate.chain": c.server_chain},
    "PKCS12": lambda c: {"ssl.keystore.type": "PKCS12",
                         "ssl.keystore.location": str(c.server_p12),
                         "ssl.keystore.password": STORE_PASSWORD},
    "PKCS12 under the default type JKS": lambda c: {
        "ssl.keystore.location": str(c.server_p12), "ssl.keystore.password": STORE_PASSWORD},
    "listener-prefixed keys": lambda c: {
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(c.server_pem),
        "ssl.keystore.location": "/nowhere/overridden.jks"},
}


@pytest.mark.parametrize("form", list(KEYSTORES))
def test_every_key_store_form_serves_a_verified_handshake(logdir: LogDir, serve: Serve,
                                                          certs: Certificates, form: str) -> None:
    logdir.create_logs("t", [0])
    server = serve(dotted={"listeners": "SSL://127.0.0.1:0", **KEYSTORES[form](certs)})
    assert metadata_ok(server.bootstrap_servers, **trusting(certs))


def test_a_client_that_does_not_trust_the_brokers_authority_is_refused_and_others_go_on(
        ssl_server: KafkaServer, certs: Certificates) -> None:
    assert refused(ssl_server.bootstrap_servers,
                   **{**trusting(certs), "ssl.ca.location": str(certs.other_ca)})
    assert metadata_ok(ssl_server.bootstrap_servers, **trusting(certs))


def test_a_plaintext_client_on_an_ssl_listener_is_closed_and_the_listener_goes_on(
        ssl_server: KafkaServer, certs: Certificates) -> None:
    assert refused(ssl_server.bootstrap_servers)            # PLAINTEXT
    host, port = ssl_server.address
    with socket.create_connection((host, port), timeout=5) as raw:
        raw.sendall(b"\x00\x00\x00\x0a" + bytes(10))                # a frame, not a handshake
        raw.settimeout(15)
        while raw.recv(4096):          # the server answers with a TLS alert at most, then closes
            pass
    assert metadata_ok(ssl_server.bootstrap_servers, **trusting(certs))


def client_certificate(certs: Certificates) -> dict[str, str]:
    return {"ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key)}


def serve_asking_for_certificates(logdir: LogDir, serve: Serve, certs: Certificates,
                                  client_auth: str, trust: dict[str, str]) -> KafkaServer:
    logdir.create_logs("t", [0])
    return serve(dotted={"listeners": "SSL://127.0.0.1:0", **pem_keystore(certs),
                         "ssl.client.auth": client_auth, "ssl.truststore.type": "PEM", **trust})


def test_required_client_authentication_refuses_a_client_without_a_certificate(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    server = serve_asking_for_certificates(logdir, serve, certs, "required",
                                           {"ssl.truststore.location": str(certs.ca)})
    assert refused(server.bootstrap_servers, **trusting(certs))
    p = producer(server.bootstrap_servers, **trusting(certs, **client_certificate(certs)))
    assert produce_all(p, "t", [b"signed"]) == [(0, 0)]
    assert logdir.log("t", 0).log_end_offset == 1


def test_requested_client_authentication_serves_a_client_without_a_certificate(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    server = serve_asking_for_certificates(
        logdir, serve, certs, "requested", {"ssl.truststore.certificates": certs.ca.read_text()})
    assert metadata_ok(server.bootstrap_servers, **trusting(certs))
    assert metadata_ok(server.bootstrap_servers, **trusting(certs, **client_certificate(certs)))


def test_a_listener_of_tls_1_3_only_refuses_a_tls_1_2_client(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    logdir.create_logs("t", [0])
    server = serve(dotted={"listeners": "SSL://127.0.0.1:0", **pem_keystore(certs),
                           "ssl.enabled.protocols": "TLSv1.3"})

    def handshake(version: ssl.TLSVersion) -> str:
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.minimum_version = context.maximum_version = version
        with socket.create_connection(server.address, timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                return str(tls.version())

    with pytest.raises(ssl.SSLError):
        handshake(ssl.TLSVersion.TLSv1_2)
    assert handshake(ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
    assert metadata_ok(server.bootstrap_servers, **trusting(certs))


# ---- SASL_SSL -----------------------------------------------------------------------------------
def sasl_ssl(certs: Certificates, **extra: str) -> dict[str, str]:
    return {"listeners": "SASL_SSL://127.0.0.1:0", **pem_keystore(certs),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "strata.sasl.scram.users": SCRAM_USERS, **extra}


def scram(certs: Certificates, password: str = "carol-secret", **extra: Any) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "carol",
            "sasl.password": password, **extra}


def test_confluent_kafka_authenticates_with_scram_over_sasl_ssl(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    logdir.create_logs("t", [0])
    server = serve(dotted=sasl_ssl(certs))
    p = producer(server.bootstrap_servers, **scram(certs))
    assert produce_all(p, "t", [b"x", b"y"]) == [(0, 0), (0, 1)]
    c = consumer(server.bootstrap_servers, **scram(certs))
    try:
        assert [m.value() for m in consume(c, "t", 2)] == [b"x", b"y"]
    finally:
        c.close()


def test_a_wrong_password_over_sasl_ssl_is_an_authentication_error_and_stores_nothing(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    logdir.create_logs("t", [0])
    server = serve(dotted=sasl_ssl(certs))
    errors: list[ck.KafkaError] = []
    p = producer(server.bootstrap_servers, error_cb=errors.append, **scram(certs, "wrong"))
    p.produce("t", value=b"never", partition=0)
    deadline = time.monotonic() + TIMEOUT_S
    while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        p.poll(0.2)
    p.purge()
    p.flush(1)
    assert logdir.log("t", 0).log_end_offset == 0


def test_kafka_python_authenticates_with_plain_over_sasl_ssl(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    logdir.create_logs("t", [0])
    server = serve(dotted=sasl_ssl(certs))
    p = KafkaProducer(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000,
                      max_block_ms=10000, security_protocol="SASL_SSL", ssl_cafile=str(certs.ca),
                      sasl_mechanism="PLAIN", sasl_plain_username="alice",
                      sasl_plain_password="alice-secret")
    try:
        meta = p.send("t", value=b"plain", partition=0).get(timeout=TIMEOUT_S)
    finally:
        p.close(timeout=5)
    assert meta.offset == 0
    assert logdir.log("t", 0).log_end_offset == 1


def test_sasl_ssl_asks_for_client_certificates_only_through_its_prefixed_key(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    logdir.create_logs("t", [0])
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}
    unprefixed = serve(dotted=sasl_ssl(certs, **trust, **{"ssl.client.auth": "required"}))
    assert metadata_ok(unprefixed.bootstrap_servers, **scram(certs))   # ignored, as Kafka
    prefixed = serve(dotted=sasl_ssl(
        certs, **trust, **{"listener.name.sasl_ssl.ssl.client.auth": "required"}))
    assert refused(prefixed.bootstrap_servers, **scram(certs))
    assert metadata_ok(prefixed.bootstrap_servers,
                       **scram(certs, **client_certificate(certs)))


def test_a_key_store_that_cannot_be_read_fails_the_server_before_it_starts(
        logdir: LogDir, certs: Certificates, tmp_path: Path) -> None:
    from node.kafka.config import KafkaServerConfig
    from storage.errors import InvalidConfigError

    config = KafkaServerConfig.from_properties({
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certs.server_p12),
        "ssl.keystore.password": "not-the-password"})
    with pytest.raises(InvalidConfigError, match="ssl.keystore.location") as caught:
        KafkaServer(logdir, config)
    assert str(certs.server_p12) in str(caught.value)
    assert "not-the-password" not in str(caught.value)


def test_describe_configs_reports_the_tls_settings_and_hides_the_passwords(
        logdir: LogDir, serve: Serve, certs: Certificates) -> None:
    from confluent_kafka.admin import ConfigResource

    logdir.create_logs("t", [0])
    server = serve(dotted={"listeners": "SSL://127.0.0.1:0",
                           **KEYSTORES["encrypted PEM file"](certs)})
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers, **trusting(certs)})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert configs["ssl.keystore.location"].value == str(certs.server_encrypted_pem)
    assert configs["ssl.keystore.type"].value == "PEM"
    assert configs["ssl.enabled.protocols"].value == "TLSv1.2,TLSv1.3"
    assert configs["ssl.key.password"].is_sensitive
    assert configs["ssl.key.password"].value is None
    assert configs["listeners"].value.startswith("SSL://127.0.0.1:")
