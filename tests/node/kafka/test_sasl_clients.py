"""Real clients against a SASL_PLAINTEXT listener: confluent-kafka (librdkafka), kafka-python,
aiokafka and kcat authenticate with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, produce and consume;
a wrong password fails at the client with an authentication error and stores nothing."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from typing import Any

import confluent_kafka as ck
import kafka.errors
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from kafka import KafkaProducer

from node.kafka.server import KafkaServer
from node.logdir import LogDir
from tests.node.kafka.clients import (aiokafka_round_trip, consume, consumer,
                                      kafka_python_round_trip, produce_all, producer)
from tests.node.kafka.test_sasl import SaslServe, serve_sasl  # noqa: F401 (fixture)

TIMEOUT_S = 15
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("carol", "carol-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}


@pytest.fixture
def sasl_server(logdir: LogDir, serve_sasl: SaslServe) -> KafkaServer:  # noqa: F811
    logdir.create_logs("t", [0])
    return serve_sasl()


def librdkafka_auth(mechanism: str, password: str | None = None) -> dict[str, Any]:
    user, secret = USERS[mechanism]
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password or secret}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_round_trip(logdir: LogDir, sasl_server: KafkaServer,
                                    mechanism: str) -> None:
    auth = librdkafka_auth(mechanism)
    p = producer(sasl_server.bootstrap_servers, **auth)
    assert produce_all(p, "t", [b"a", b"b", b"c"]) == [(0, 0), (0, 1), (0, 2)]
    c = consumer(sasl_server.bootstrap_servers, **auth)
    try:
        assert [m.value() for m in consume(c, "t", 3)] == [b"a", b"b", b"c"]
    finally:
        c.close()
    assert logdir.log("t", 0).log_end_offset == 3


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_wrong_password_is_an_authentication_error(
        logdir: LogDir, sasl_server: KafkaServer, mechanism: str) -> None:
    errors: list[ck.KafkaError] = []
    p = producer(sasl_server.bootstrap_servers, error_cb=errors.append,
                 **librdkafka_auth(mechanism, password="wrong"))
    p.produce("t", value=b"never", partition=0)
    deadline = time.monotonic() + TIMEOUT_S
    while not any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        p.poll(0.2)
    assert "Authentication failed" in next(
        e.str() for e in errors if e.code() == ck.KafkaError._AUTHENTICATION)
    p.purge()
    p.flush(1)
    assert logdir.log("t", 0).log_end_offset == 0


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_round_trip(logdir: LogDir, sasl_server: KafkaServer,
                                 mechanism: str) -> None:
    user, password = USERS[mechanism]
    values = [b"k0", b"k1", b"k2"]
    assert kafka_python_round_trip(
        sasl_server.bootstrap_servers, "t", values, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism, sasl_plain_username=user,
        sasl_plain_password=password) == ([0, 1, 2], values)


def test_kafka_python_wrong_password_is_an_authentication_error(
        sasl_server: KafkaServer, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(kafka.errors.KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(bootstrap_servers=sasl_server.bootstrap_servers, bootstrap_timeout_ms=3000,
                      security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                      sasl_plain_username="carol", sasl_plain_password="wrong")
    assert "Authentication failed during authentication due to invalid credentials" in (
        caplog.text)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_round_trip(sasl_server: KafkaServer, mechanism: str) -> None:
    user, password = USERS[mechanism]
    values = [b"m0", b"m1", b"m2"]
    assert aiokafka_round_trip(sasl_server.bootstrap_servers, "t", values,
                               security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                               sasl_plain_username=user, sasl_plain_password=password) == values


def test_aiokafka_wrong_password_is_an_authentication_error(
        sasl_server: KafkaServer, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=sasl_server.bootstrap_servers,
                             request_timeout_ms=5000, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password="wrong")
        try:
            await p.start()
        finally:
            await p.stop()

    with pytest.raises(AioKafkaError, match="Unable to bootstrap"):
        asyncio.run(asyncio.wait_for(run(), TIMEOUT_S))
    assert ("[Error 58] SaslAuthenticationFailed: Authentication failed: Invalid username or "
            "password") in caplog.text


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_lists_metadata_over_sasl(sasl_server: KafkaServer, mechanism: str) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: run scripts/setup-kcat"
    user, password = USERS[mechanism]
    listing = subprocess.run(
        [kcat, "-b", sasl_server.bootstrap_servers, "-X", "security.protocol=SASL_PLAINTEXT",
         "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}",
         "-X", f"sasl.password={password}", "-m", "10", "-L"],
        capture_output=True, text=True, timeout=TIMEOUT_S)
    assert listing.returncode == 0, listing.stderr
    assert 'topic "t" with 1 partitions' in listing.stdout
