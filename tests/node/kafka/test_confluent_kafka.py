"""librdkafka (confluent-kafka) against a served log directory: metadata, produce and consume
round trips with every codec, idempotence, offsets lookups and the errors clients see."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from node.kafka.server import KafkaServer
from node.logdir import LogDir
from storage.record_format import Compression, Record
from storage.records import ControlType
from tests.node.kafka.clients import consume, consumer, produce_all, producer
from tests.node.kafka.conftest import Serve

ROOT = Path(__file__).resolve().parents[3]


def test_metadata_names_this_broker_as_leader_of_every_partition(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("orders", range(3))
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    meta = admin.list_topics(timeout=10)
    host, port = server.address
    assert [(b.id, b.host, b.port) for b in meta.brokers.values()] == [(0, host, port)]
    assert meta.cluster_id and meta.controller_id == 0
    topic = meta.topics["orders"]
    assert topic.error is None
    assert sorted(topic.partitions) == [0, 1, 2]
    assert all(p.leader == 0 and p.replicas == [0] and p.isrs == [0]
               for p in topic.partitions.values())


def test_cluster_id_is_the_same_after_a_restart(logdir: LogDir, serve: Serve) -> None:
    first = serve()
    cluster_id = AdminClient({"bootstrap.servers": first.bootstrap_servers}
                             ).list_topics(timeout=10).cluster_id
    first.close()
    second = serve()
    assert AdminClient({"bootstrap.servers": second.bootstrap_servers}
                       ).list_topics(timeout=10).cluster_id == cluster_id


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_with_every_codec(logdir: LogDir, server: KafkaServer, codec: str) -> None:
    """librdkafka compresses with the codec asked for (it does LZ4 only with a broker that
    serves FindCoordinator) and the log stores its batches in that codec, as produced."""
    logdir.create_logs("t", [0])
    values = [b"value-%d-" % i * 20 for i in range(50)]
    p = producer(server.bootstrap_servers, **{"compression.type": codec})
    delivered = produce_all(p, "t", values)
    assert [offset for _, offset in delivered] == list(range(50))
    stored = logdir.log("t", 0)
    assert stored.log_end_offset == 50
    assert [r.value for r in stored.read()] == values
    codecs = {batch.compression for batch in stored.read_raw(0, 1 << 20).batches()}
    assert codecs == {Compression[codec.upper()]}
    c = consumer(server.bootstrap_servers)
    try:
        assert [m.value() for m in consume(c, "t", 50)] == values
    finally:
        c.close()


def test_idempotent_producer_gets_a_producer_id_and_its_batches_keep_it(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    p = producer(server.bootstrap_servers, **{"enable.idempotence": True, "acks": "all"})
    produce_all(p, "t", [b"a", b"b", b"c"])
    produce_all(p, "t", [b"d"])
    batches = list(logdir.log("t", 0).read_raw(0).batches())
    assert {b.producer_id for b in batches} == {0}
    assert [b.base_sequence for b in batches][0] == 0
    assert sum(len(b.records()) for b in batches) == 4


def test_offsets_lookups_earliest_latest_and_by_time(logdir: LogDir,
                                                     server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    p = producer(server.bootstrap_servers)
    for i, ts in enumerate([1000, 2000, 3000]):
        produce_all(p, "t", [b"x%d" % i], timestamp=ts)
    c = consumer(server.bootstrap_servers)
    try:
        assert c.get_watermark_offsets(ck.TopicPartition("t", 0), timeout=10) == (0, 3)
        found = c.offsets_for_times([ck.TopicPartition("t", 0, 1500),
                                     ], timeout=10)
        assert found[0].offset == 1
        beyond = c.offsets_for_times([ck.TopicPartition("t", 0, 9999)], timeout=10)
        assert beyond[0].offset == -1
    finally:
        c.close()


def test_produce_to_an_unknown_topic_fails_with_unknown_topic(server: KafkaServer) -> None:
    p = producer(server.bootstrap_servers, **{"topic.metadata.propagation.max.ms": 500})
    errors = []
    p.produce("missing", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert [e.code() for e in errors] == [ck.KafkaError.UNKNOWN_TOPIC_OR_PART]


def test_metadata_creates_a_topic_when_auto_create_is_on(logdir: LogDir, serve: Serve) -> None:
    server = serve(auto_create_topics_enable="true", num_partitions="2")
    p = producer(server.bootstrap_servers)
    produce_all(p, "fresh", [b"x"], partition=1)
    assert logdir.get_log("fresh", 0) is not None
    assert logdir.log("fresh", 1).log_end_offset == 1


def test_a_batch_above_max_message_bytes_is_message_too_large(logdir: LogDir, tmp_path,
                                                              serve: Serve) -> None:
    logdir.set_topic_config("small", logdir.default_config.with_overrides(
        {"max.message.bytes": "1000"}))
    logdir.create_logs("small", [0])
    server = serve()
    p = producer(server.bootstrap_servers, **{"message.max.bytes": 100000})
    errors = []
    p.produce("small", value=b"x" * 5000, partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert [e.code() for e in errors] == [ck.KafkaError.MSG_SIZE_TOO_LARGE]
    assert logdir.log("small", 0).log_end_offset == 0


def test_a_fetch_offset_out_of_range_resets_by_auto_offset_reset(logdir: LogDir,
                                                                 server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    produce_all(producer(server.bootstrap_servers), "t", [b"a", b"b"])
    c = consumer(server.bootstrap_servers, **{"auto.offset.reset": "earliest"})
    try:
        assert [m.value() for m in consume(c, "t", 2, offset=50)] == [b"a", b"b"]
    finally:
        c.close()


def test_a_read_committed_consumer_skips_an_aborted_transaction_and_stops_at_an_open_one(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    log.append([Record(value=b"before", timestamp=1000)])
    log.append([Record(value=b"aborted", timestamp=1000)], producer_id=9, producer_epoch=0,
               base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(ControlType.ABORT, producer_id=9, producer_epoch=0)
    log.append([Record(value=b"after", timestamp=1000)])
    log.append([Record(value=b"open", timestamp=1000)], producer_id=11, producer_epoch=0,
               base_sequence=0, is_transactional=True)
    committed = consumer(server.bootstrap_servers)          # librdkafka's default
    uncommitted = consumer(server.bootstrap_servers, **{"isolation.level": "read_uncommitted"})
    try:
        assert [m.value() for m in consume(committed, "t", 2)] == [b"before", b"after"]
        assert committed.poll(1.0) is None                 # "open" is above the LSO
        # ListOffsets latest under read_committed: the last stable offset
        assert committed.get_watermark_offsets(ck.TopicPartition("t", 0), timeout=10) == (0, 4)
        assert [m.value() for m in consume(uncommitted, "t", 4)] == [
            b"before", b"aborted", b"after", b"open"]
    finally:
        committed.close()
        uncommitted.close()


def test_after_a_restart_the_data_is_served_and_producer_ids_are_not_reused(
        tmp_path, serve: Serve) -> None:
    first_dir = LogDir.open(tmp_path / "restart", start_tasks=False)
    first_dir.create_logs("t", [0])
    server = serve(first_dir)
    p = producer(server.bootstrap_servers, **{"enable.idempotence": True})
    produce_all(p, "t", [b"a", b"b"])
    server.close()
    first_dir.close()
    with LogDir.open(tmp_path / "restart", start_tasks=False) as again:
        server = serve(again)
        p = producer(server.bootstrap_servers, **{"enable.idempotence": True})
        assert produce_all(p, "t", [b"c"]) == [(0, 2)]
        c = consumer(server.bootstrap_servers)
        try:
            assert [m.value() for m in consume(c, "t", 3)] == [b"a", b"b", b"c"]
        finally:
            c.close()
        server.close()
        producer_ids = [b.producer_id for b in again.log("t", 0).read_raw(0).batches()]
    assert producer_ids[0] == 0 and producer_ids[-1] >= 1000


_FIRST_LOAD = """
import asyncio, json, sys, tempfile, threading
import confluent_kafka as ck
from storage import jit
from node import LogDir
from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer

where = []
load = jit._load

def spy():
    try:
        asyncio.get_running_loop()
        where.append("event loop")
    except RuntimeError:
        where.append("pool")
    load()

jit._load = spy
logdir = LogDir.open(tempfile.mkdtemp(), start_tasks=False)
logdir.create_logs("t", [0])
server = KafkaServer(logdir, KafkaServerConfig.from_properties(
    {"listeners": "PLAINTEXT://127.0.0.1:0"})).start()
producer = ck.Producer({"bootstrap.servers": server.bootstrap_servers, "acks": "all",
                        "enable.idempotence": True, "linger.ms": 0})
for i in range(3):      # 8 KiB values: each batch needs the compiled record check
    producer.produce("t", value=b"v" * 8192, key=b"k%d" % i, partition=0)
    producer.flush(30)
end = logdir.log("t", 0).log_end_offset
server.close()
logdir.close()
print(json.dumps([where, end, "numba" in sys.modules]))
"""


def test_the_first_produce_that_needs_compiled_kernels_loads_them_off_the_event_loop() -> None:
    """In a fresh broker process, where the kernels are not loaded yet: the load (numba's
    import) would hold every connection of the directory if a produce made it on the event
    loop."""
    out = subprocess.run([sys.executable, "-c", _FIRST_LOAD], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    where, end, numba_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert where == ["pool"] and numba_loaded
    assert end == 3
