"""A cluster whose brokers listen over TLS: every directory's broker takes the cluster's ``ssl.*``
keys (listener-prefixed among them), kcat lists the three brokers over ``SSL`` and librdkafka
produces to and consumes from all of them; a certificate is rotated by replacing its file and
restarting the directory's node (the runbook's way); a key store that a node cannot read undoes
the start, naming the directory and the key."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from cluster.errors import ClusterNotRunningError, ListenerBindError
from tests.cluster.conftest import FAST
from tests.node.kafka.certificates import make_certificates
from tests.node.kafka.clients import consume, consumer, produce_all, producer
from tests.node.kafka.test_tls_clients import metadata_ok, refused

TIMEOUT_S = 20


def test_three_brokers_serve_kafka_clients_over_tls(start_cluster, tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "pki")
    c = start_cluster(dirs=3, config={
        **FAST, "listeners": "SSL://127.0.0.1:0",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(certs.server_pem)})
    c.create_topic("secure", partitions=3)
    assert len(c.bootstrap_servers.split(",")) == 3
    assert c.security_protocol == "SSL"
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is missing: run scripts/setup-kcat"
    listing = subprocess.run(
        [kcat, "-b", c.bootstrap_servers.split(",")[0], "-X", "security.protocol=ssl",
         "-X", f"ssl.ca.location={certs.ca}", "-m", "10", "-L"],
        capture_output=True, text=True, timeout=TIMEOUT_S)
    assert listing.returncode == 0, listing.stderr
    assert "3 brokers:" in listing.stdout
    assert 'topic "secure" with 3 partitions' in listing.stdout
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    p = producer(c.bootstrap_servers, **tls)
    for part in range(3):
        assert produce_all(p, "secure", [b"%d-%d" % (part, i) for i in range(5)],
                           partition=part) == [(part, i) for i in range(5)]
    reader = consumer(c.bootstrap_servers, **tls)
    try:
        for part in range(3):
            assert [m.value() for m in consume(reader, "secure", 5, partition=part)] == \
                [b"%d-%d" % (part, i) for i in range(5)]
    finally:
        reader.close()
    assert [r.value for r in c.consume("secure", 1)] == [b"1-%d" % i for i in range(5)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_certificate_is_rotated_by_replacing_its_file_and_restarting_the_node(
        start_cluster, tmp_path: Path) -> None:
    old, new = make_certificates(tmp_path / "old"), make_certificates(tmp_path / "new")
    store = tmp_path / "broker.pem"
    shutil.copyfile(old.server_pem, store)
    c = start_cluster(dirs=1, config={**FAST, "listeners": f"SSL://127.0.0.1:{free_port()}",
                                      "ssl.keystore.type": "PEM",
                                      "ssl.keystore.location": str(store)})
    c.create_topic("t", partitions=1)
    bootstrap = c.bootstrap_servers
    trusting_old = {"security.protocol": "SSL", "ssl.ca.location": str(old.ca)}
    trusting_new = {"security.protocol": "SSL", "ssl.ca.location": str(new.ca)}
    assert metadata_ok(bootstrap, **trusting_old)
    assert refused(bootstrap, **trusting_new)
    shutil.copyfile(new.server_pem, store)
    assert metadata_ok(bootstrap, **trusting_old)        # read at the start, not at each handshake
    done = c.restart_node(c.description.log_dirs[0])
    assert (done.serving, done.kafka_broker, done.kafka_error) == (True, bootstrap, None)
    assert c.bootstrap_servers == bootstrap               # the same fixed port
    assert metadata_ok(bootstrap, **trusting_new)
    assert refused(bootstrap, **trusting_old)

    store.write_text("not a key store")                  # a rotation gone wrong is reported
    broken = c.restart_node(c.description.log_dirs[0])
    assert broken.online and not broken.serving and broken.kafka_broker is None
    assert "ssl.keystore.location" in broken.kafka_error and str(store) in broken.kafka_error
    shutil.copyfile(new.server_pem, store)
    assert c.restart_node(c.description.log_dirs[0]).serving
    assert metadata_ok(bootstrap, **trusting_new)


def test_a_key_store_a_node_cannot_read_undoes_the_start(ray_session: str,
                                                         tmp_path: Path) -> None:
    from cluster import Cluster

    missing = tmp_path / "nowhere" / "broker.pem"
    with pytest.raises(ListenerBindError, match="ssl.keystore.location") as err:
        Cluster.start(log_dirs=[str(tmp_path / "d0")], cleaners=1,
                      config={**FAST, "listeners": "SSL://127.0.0.1:0",
                              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(missing)},
                      namespace="strata-test-tls-unreadable", address=ray_session)
    assert err.value.fields["directory"] == str(tmp_path / "d0")
    assert err.value.fields["key"] == "ssl.keystore.location"
    assert str(missing) in str(err.value)
    with pytest.raises(ClusterNotRunningError):
        Cluster.connect(namespace="strata-test-tls-unreadable")
