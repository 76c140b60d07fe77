"""``meta.properties`` (Kafka's MetaProperties) and ``cluster-log-dirs``: round trips, Kafka's own
files, and a typed error naming the file for every malformed one."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

import pytest

from node.cluster_dirs import KnownDir, read_cluster_dirs, read_identity, write_cluster_dirs
from node.errors import InvalidMetaPropertiesError
from node.meta_properties import (MetaProperties, is_uuid, random_uuid, read_meta_properties,
                                  write_meta_properties)
from storage.errors import CheckpointError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kafka-real"


def test_meta_properties_round_trip_writes_kafkas_v1_keys(tmp_path: Path) -> None:
    meta = MetaProperties(1, "hSCzevIQRUa-ojqTd_8C5w", 3, "H9Ogx1e_S4WGXyUnsXAtlw")
    write_meta_properties(tmp_path, meta)
    text = (tmp_path / "meta.properties").read_text()
    assert text.splitlines()[1:] == ["version=1", "cluster.id=hSCzevIQRUa-ojqTd_8C5w",
                                     "node.id=3", "directory.id=H9Ogx1e_S4WGXyUnsXAtlw"]
    assert read_meta_properties(tmp_path) == meta
    assert not list(tmp_path.glob("*.tmp"))


def test_meta_properties_reads_the_files_real_kafka_brokers_wrote() -> None:
    kraft = read_meta_properties(FIXTURES / "Jeong-Rae__KafkaDemo" / "kraft-combined-logs")
    assert kraft == MetaProperties(1, "hSCzevIQRUa-ojqTd_8C5w", 1, None)
    zk = read_meta_properties(FIXTURES / "seanorth__kafka-server" / "kafka-logs")
    assert zk == MetaProperties(0, "3d1XOGWUQq-2TaCwWvBALA", 0, None)
    with_dir = read_meta_properties(
        FIXTURES / "apache__kafka" / "core-data" / "kafka-14742817827683959487")
    assert with_dir == MetaProperties(1, "cmsnF94nR4SecOYk7JtYWw", 2, "H9Ogx1e_S4WGXyUnsXAtlw")


def test_meta_properties_absent_reads_as_none(tmp_path: Path) -> None:
    assert read_meta_properties(tmp_path) is None
    assert read_identity(tmp_path).meta is None and read_identity(tmp_path).known is None


@pytest.mark.parametrize("content, key", [
    (b"version=2\ncluster.id=x\nnode.id=1\n", "version"),
    (b"version=1\nnode.id=1\n", "cluster.id"),
    (b"version=1\ncluster.id=abc\n", "node.id"),
    (b"version=1\ncluster.id=abc\nnode.id=one\n", "node.id"),
    (b"version=1\ncluster.id=abc\nnode.id=2147483648\n", "node.id"),
    (b"version=1\ncluster.id=abc\nnode.id=1\ndirectory.id=short\n", "directory.id"),
    (b"version=1\ncluster.id=abc\nnode.id=1\ndirectory.id=" + b"A" * 22 + b"\n", "directory.id"),
    (b"version=0\nbroker.id=-1\n", "broker.id"),
    (b"version=1\ncluster.id=\xff\xfe\nnode.id=1\n", None),
    (b"version=1\ncluster.id=a\\\n  b\nnode.id=1\n", None),
])
def test_malformed_meta_properties_is_a_typed_error_naming_the_file(
        tmp_path: Path, content: bytes, key: str | None) -> None:
    (tmp_path / "meta.properties").write_bytes(content)
    with pytest.raises(InvalidMetaPropertiesError) as caught:
        read_meta_properties(tmp_path)
    assert caught.value.fields["file"] == str(tmp_path / "meta.properties")
    assert str(tmp_path / "meta.properties") in str(caught.value)
    assert caught.value.fields.get("key") == key
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is InvalidMetaPropertiesError and again.fields == caught.value.fields


def test_random_uuid_is_a_kafka_uuid_never_reserved_nor_starting_with_a_dash() -> None:
    for _ in range(2000):
        uuid = random_uuid()
        raw = base64.urlsafe_b64decode(uuid + "==")
        assert len(uuid) == 22 and is_uuid(uuid) and len(raw) == 16
        assert not uuid.startswith("-")
        assert int.from_bytes(raw, "big") >= 100


def test_cluster_log_dirs_round_trip_keeps_paths_with_spaces(tmp_path: Path) -> None:
    known = (KnownDir(1, random_uuid(), "/mnt/disk two/logs"), KnownDir(0, random_uuid(), "/a"))
    write_cluster_dirs(tmp_path, known)
    assert read_cluster_dirs(tmp_path) == (known[1], known[0])
    assert (tmp_path / "cluster-log-dirs").read_text().splitlines()[:2] == ["0", "2"]


@pytest.mark.parametrize("content", [b"0\n1\n0 notauuid /a\n", b"0\n2\n0 AAAAAAAAAAAAAAAAAAAAAA /a\n",
                                     b"1\n0\n", b"0\n1\nx AAAAAAAAAAAAAAAAAAAAAA /a\n"])
def test_malformed_cluster_log_dirs_is_a_checkpoint_error_naming_the_file(
        tmp_path: Path, content: bytes) -> None:
    (tmp_path / "cluster-log-dirs").write_bytes(content)
    with pytest.raises(CheckpointError, match="cluster-log-dirs"):
        read_cluster_dirs(tmp_path)
