"""ListOffsets and Metadata over the wire: Kafka's special timestamps, the read_committed cap,
lookups by time, and Metadata's topic lists and auto-creation rules."""

from __future__ import annotations

import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.logdir import LogDir
from storage.record_format import Record
from tests.node.kafka.conftest import Serve, take_offline
from tests.node.kafka.wire import WireClient

LIST_OFFSETS, METADATA = 2, 3
ZERO = uuid.UUID(int=0)


def list_offset(client: WireClient, timestamp: int, *, topic: str = "t", version: int = 7,
                isolation: int = 0) -> tuple[int, int, int]:
    answer = client.call(LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]})
    part = answer.topics[0].partitions[0]
    return part.error_code, part.offset, part.timestamp


def metadata(client: WireClient, topics: list[str] | None, *, version: int = 12,
             allow: bool = True) -> object:
    return client.call(METADATA, version, {
        "topics": None if topics is None else [{"name": t, "topic_id": ZERO} for t in topics],
        "allow_auto_topic_creation": allow, "include_topic_authorized_operations": False})


def test_special_timestamps_and_lookups_by_time(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    log.append([Record(value=b"a", timestamp=1000), Record(value=b"b", timestamp=5000)])
    log.append([Record(value=b"c", timestamp=3000)])
    log.maybe_increment_log_start_offset(1)
    with WireClient(server.address) as client:
        assert list_offset(client, -2) == (0, 1, -1)              # earliest: the log start
        assert list_offset(client, -1) == (0, 3, -1)              # latest: the high watermark
        assert list_offset(client, -3) == (0, 1, 5000)            # max timestamp
        assert list_offset(client, 2000)[1] == 1                  # first record at/after 2000
        assert list_offset(client, 9000) == (0, -1, -1)           # nothing that recent
        assert list_offset(client, -1, version=1) == (0, 3, -1)
        assert list_offset(client, -1, topic="u")[0] == ErrorCode.unknown_topic_or_partition


def test_latest_under_read_committed_is_the_last_stable_offset(logdir: LogDir,
                                                               server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    log.append([Record(value=b"a", timestamp=1000)])
    log.append([Record(value=b"open", timestamp=2000)], producer_id=4, producer_epoch=0,
               base_sequence=0, is_transactional=True)
    with WireClient(server.address) as client:
        assert list_offset(client, -1, isolation=1)[1] == 1
        assert list_offset(client, -1, isolation=0)[1] == 2
        assert list_offset(client, 1500, isolation=1)[1] == -1    # not fetchable yet
        assert list_offset(client, 1500, isolation=0)[1] == 1


def test_metadata_topic_lists_null_means_all_and_empty_means_none(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("a", [0])
    logdir.create_logs("b", [0, 1])
    with WireClient(server.address) as client:
        assert sorted(t.name for t in metadata(client, None).topics) == ["a", "b"]
        assert metadata(client, []).topics == ()
        assert sorted(t.name for t in metadata(client, [], version=0).topics) == ["a", "b"]
        missing = metadata(client, ["zz"]).topics[0]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert logdir.get_log("zz", 0) is None          # auto.create.topics.enable is off


def test_auto_creation_needs_the_setting_and_the_requests_consent(logdir: LogDir,
                                                                  serve: Serve) -> None:
    server = serve(auto_create_topics_enable="true", num_partitions="3")
    with WireClient(server.address) as client:
        refused = metadata(client, ["declined"], allow=False).topics[0]
        created = metadata(client, ["made"]).topics[0]
        invalid = metadata(client, ["bad name!"]).topics[0]
    assert refused.error_code == ErrorCode.unknown_topic_or_partition
    assert logdir.get_log("declined", 0) is None
    assert created.error_code == ErrorCode.none
    assert [p.partition_index for p in created.partitions] == [0, 1, 2]
    assert all(logdir.get_log("made", p) is not None for p in range(3))
    assert invalid.error_code == ErrorCode.invalid_topic_exception


def test_a_missing_partition_of_a_topic_is_leader_not_available(logdir: LogDir,
                                                                server: KafkaServer) -> None:
    logdir.create_logs("gappy", [0, 2])
    with WireClient(server.address) as client:
        topic = metadata(client, ["gappy"]).topics[0]
    assert [(p.partition_index, p.error_code, p.leader_id) for p in topic.partitions] == [
        (0, ErrorCode.none, 0), (1, ErrorCode.leader_not_available, -1),
        (2, ErrorCode.none, 0)]


def test_the_partitions_of_an_offline_directory_are_leader_not_available_and_metadata_answers(
        logdir: LogDir, server: KafkaServer, tmp_path: Path) -> None:
    logdir.create_logs("t", [0, 1])
    logdir.log("t", 0).append([Record(value=b"x", timestamp=1)])
    take_offline(logdir, "t", 0, tmp_path)
    with WireClient(server.address) as client:
        for asked in (["t"], None):
            answer = metadata(client, asked, allow=False)
            topic, = answer.topics
            assert (topic.name, topic.error_code) == ("t", ErrorCode.none)
            assert [(p.partition_index, p.error_code, p.leader_id, list(p.replica_nodes))
                    for p in topic.partitions] == \
                [(0, ErrorCode.leader_not_available, -1, []),
                 (1, ErrorCode.leader_not_available, -1, [])]
        assert [b.node_id for b in metadata(client, []).brokers] == [server.config.node_id]
