"""``BrokerConfig`` from Kafka's broker keys, and ``read_server_properties`` on real
``server.properties`` text."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.config import BrokerConfig, read_server_properties
from storage.errors import InvalidConfigError

SERVER_PROPERTIES = r"""# A Kafka server.properties, trimmed
broker.id=0
listeners=PLAINTEXT://:9092
   # indented comment
! bang comment

log.dirs=/data/d0,/data/d1, /data/d2
num.recovery.threads.per.data.dir = 4
log.retention.hours: 24
log.segment.bytes 1048576
log.cleaner.threads=2
log.cleaner.dedupe.buffer.size=\
  16777216
message.max.bytes=2000000
log.cleaner.min.cleanable.ratio=0.25
advertised.listeners
"""


def test_server_properties_are_read_as_java_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES)
    props = read_server_properties(path)
    assert props == {
        "broker.id": "0", "listeners": "PLAINTEXT://:9092",
        "log.dirs": "/data/d0,/data/d1, /data/d2", "num.recovery.threads.per.data.dir": "4",
        "log.retention.hours": "24", "log.segment.bytes": "1048576",
        "log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "16777216",
        "message.max.bytes": "2000000", "log.cleaner.min.cleanable.ratio": "0.25",
        "advertised.listeners": "",
    }


def test_broker_keys_land_in_the_scope_that_owns_them(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(SERVER_PROPERTIES)
    broker = BrokerConfig.from_properties(read_server_properties(path))
    assert broker.log_dirs == ("/data/d0", "/data/d1", "/data/d2")
    assert broker.log.retention_ms == 24 * 3_600_000
    assert broker.log.segment_bytes == 1 << 20
    assert broker.log.min_cleanable_dirty_ratio == 0.25
    assert broker.cleaner.num_threads == 2
    assert broker.cleaner.dedupe_buffer_size == 16 << 20
    assert broker.cleaner.max_message_size == 2_000_000
    assert broker.log_dir.num_recovery_threads_per_data_dir == 4
    assert broker.ignored == ("advertised.listeners", "broker.id", "listeners")
    # what each actor gets, and rebuilds the same config from
    assert broker.topic_defaults["log.segment.bytes"] == "1048576"
    assert broker.cleaner_properties["log.cleaner.threads"] == "2"
    assert broker.log_dir_properties == {"num.recovery.threads.per.data.dir": "4"}
    assert BrokerConfig.from_properties(broker.properties) == broker


def test_overrides_and_log_dirs_replace_keys_and_values_become_text() -> None:
    broker = BrokerConfig.from_properties({"log.dir": "/one", "log.cleaner.enable": False,
                                           "log.cleaner.threads": 1})
    assert broker.log_dirs == ("/one",) and broker.cleaner.enable_cleaner is False
    assert broker.properties["log.cleaner.enable"] == "false"
    changed = broker.with_overrides({"log.cleaner.threads": 3}).with_log_dirs(["/x", "/y"])
    assert changed.cleaner.num_threads == 3 and changed.log_dirs == ("/x", "/y")
    assert broker.cleaner.num_threads == 1     # frozen: the original is unchanged


def test_unknown_log_keys_and_bad_values_are_refused_with_the_key() -> None:
    with pytest.raises(InvalidConfigError, match="log.cleaner.thredas"):
        BrokerConfig.from_properties({"log.cleaner.thredas": "2"})
    with pytest.raises(InvalidConfigError, match="log.segment.bytes"):
        BrokerConfig.from_properties({"log.segment.bytes": "lots"})
    assert BrokerConfig.from_properties({"zookeeper.connect": "x"}).ignored == \
        ("zookeeper.connect",)


def test_java_properties_syntax_separators_escapes_and_continuations(tmp_path: Path) -> None:
    """What ``java.util.Properties.load`` reads: ``key value``, ``key:value``, ``key = = v``
    (the second ``=`` is the value's), escaped separators in a key, ``\\uXXXX``, an even number
    of trailing backslashes (no continuation), a ``#`` line inside a continuation (not a comment),
    CR line ends."""
    path = tmp_path / "server.properties"
    path.write_bytes(b"broker.id 7\r\nlisteners:PLAINTEXT://:9092\r\nlog.dirs = =/d\n"
                     b"advertised.listeners=a\\\\\n"
                     b"log.cleaner.threads=\\\n  # 2\n"
                     b"message.max.bytes=\\u0031\\u0030\\u0030\\u0030\n")
    assert read_server_properties(path) == {
        "broker.id": "7", "listeners": "PLAINTEXT://:9092", "log.dirs": "=/d",
        "advertised.listeners": "a\\", "log.cleaner.threads": "# 2",
        "message.max.bytes": "1000"}


@pytest.mark.parametrize(("text", "match"), [
    (b"broker.id=0\n\n# c\nlog.cleaner.thredas=2\n", r"line 4: unknown broker config key "
                                                      r"'log.cleaner.thredas'"),
    (b"broker.id=0\nbrokr.id 1\n", r"line 2: unknown broker config key 'brokr.id'"),
    (b"broker.id=0\nnum.partitons\n", r"line 2: unknown broker config key 'num.partitons'"),
    (b"broker.id=0\nlog.dirs=/d\xe9\n", r"line 2: not UTF-8 \(byte 0xe9\)"),
    (b"log.dirs=\\u00zz\n", r"line 1: malformed \\uxxxx escape"),
])
def test_server_properties_refuse_unknown_keys_and_bad_bytes_naming_the_line(
        tmp_path: Path, text: bytes, match: str) -> None:
    path = tmp_path / "server.properties"
    path.write_bytes(text)
    with pytest.raises(InvalidConfigError, match=match):
        read_server_properties(path)


def test_a_key_kafka_does_not_know_is_refused_by_set_too() -> None:
    with pytest.raises(InvalidConfigError, match="brokr.id"):
        BrokerConfig.from_properties({"brokr.id": "1"})


def test_every_key_a_kafka_listener_takes_is_a_broker_key_a_cluster_accepts(
        tmp_path: Path) -> None:
    from node.groups.config import KEYS as GROUP_KEYS
    from node.kafka.config import KEYS as LISTENER_KEYS
    from node.kafka.tls import KEYS as TLS_KEYS

    keys = [*LISTENER_KEYS, *GROUP_KEYS, *TLS_KEYS, "listener.name.ssl.ssl.keystore.location",
            "listener.name.sasl_ssl.ssl.client.auth"]
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{key}=x\n" for key in keys))
    assert sorted(read_server_properties(path)) == sorted(keys)
    config = BrokerConfig.from_properties({"strata.sasl.scram.users": "ops:ops-secret"})
    assert config.properties["strata.sasl.scram.users"] == "ops:ops-secret"
