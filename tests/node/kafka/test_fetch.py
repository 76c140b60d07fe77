"""Fetch over the wire: whole stored batches from the one holding the fetch offset, KIP-74's
first-batch rule, the high watermark and last stable offset, aborted transactions for
read_committed, sessionless answers, errors, and long polling woken by appends."""

from __future__ import annotations

import shutil
import struct
import threading
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.logdir import LogDir
from storage.record_format import Record
from storage.records import ControlType
from tests.conftest import FIXTURES
from tests.node.kafka.conftest import Serve
from tests.node.kafka.wire import WireClient

FETCH = 1
LIST_OFFSETS = 2
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def fetch(client: WireClient, partitions: list[tuple[str, int, int]], *, max_wait: int = 0,
          min_bytes: int = 1, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
          isolation: int = READ_UNCOMMITTED, session_id: int = 0, session_epoch: int = -1,
          version: int = 12) -> object:
    topics: dict[str, list[dict]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append({
            "partition": partition, "fetch_offset": offset,
            "partition_max_bytes": partition_max_bytes})
    return client.call(FETCH, version, {
        "max_wait": max_wait, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": isolation, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": []})


def append(logdir: LogDir, topic: str, partition: int, *values: bytes, **kwargs) -> None:
    logdir.log(topic, partition).append([Record(value=v, timestamp=1000) for v in values],
                                        **kwargs)


def stored_batches(log, start: int, upper: int) -> bytes:
    """The stored bytes of the batches from the one holding ``start`` up to ``upper``, read
    segment by segment with ``read_raw``."""
    out, offset = b"", start
    while offset < upper:
        fetched = log.read_raw(offset)
        if fetched is None:
            break
        data, position = fetched.data, 0
        while position < len(data):
            base, length = struct.unpack_from(">qi", data, position)
            if base >= upper:
                return out
            out += data[position:position + 12 + length]
            offset = base + struct.unpack_from(">i", data, position + 23)[0] + 1
            position += 12 + length
    return out


def test_fetch_returns_the_stored_batch_holding_the_fetch_offset(logdir: LogDir,
                                                                 server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    append(logdir, "t", 0, b"a", b"b", b"c")
    append(logdir, "t", 0, b"d")
    stored = logdir.log("t", 0).read_raw(0).data
    with WireClient(server.address) as client:
        answer = fetch(client, [("t", 0, 1)]).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    assert answer.records == stored      # from the batch holding offset 1, i.e. offset 0
    assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (4, 4, 0)
    assert answer.aborted_transactions is None
    assert answer.preferred_read_replica == -1


def test_fetch_reads_across_segments(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    append(logdir, "t", 0, b"a")
    log.roll()
    append(logdir, "t", 0, b"b")
    with WireClient(server.address) as client:
        answer = fetch(client, [("t", 0, 0)]).responses[0].partitions[0]
    expected = log.read_raw(0).data + log.read_raw(1).data
    assert answer.records == expected


def test_a_batch_larger_than_the_limits_is_returned_whole_only_for_the_first_partition(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0, 1])
    append(logdir, "t", 0, b"x" * 5000)
    append(logdir, "t", 1, b"y" * 5000)
    with WireClient(server.address) as client:
        answer = fetch(client, [("t", 0, 0), ("t", 1, 0)], max_bytes=100,
                       partition_max_bytes=100).responses[0].partitions
    assert answer[0].records == logdir.log("t", 0).read_raw(0).data
    assert len(answer[0].records) > 5000
    assert answer[1].records == b""        # after the first batch the limits are strict
    assert answer[1].high_watermark == 1   # still listed: a full response names every partition


def test_partition_max_bytes_stops_on_a_batch_boundary(logdir: LogDir,
                                                       server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    for i in range(5):
        append(logdir, "t", 0, b"%d" % i * 100)
    first_size = len(logdir.log("t", 0).read_raw(0, 1, min_one_message=True).data)
    with WireClient(server.address) as client:
        answer = fetch(client, [("t", 0, 0)],
                       partition_max_bytes=2 * first_size + 10).responses[0].partitions[0]
    assert len(answer.records) == 2 * first_size


def test_read_committed_stops_at_the_last_stable_offset_and_lists_aborted_transactions(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    append(logdir, "t", 0, b"plain")                                        # 0
    append(logdir, "t", 0, b"doomed", producer_id=9, producer_epoch=0,      # 1
           base_sequence=0, is_transactional=True)
    log.append_end_txn_marker(ControlType.ABORT, producer_id=9, producer_epoch=0)  # 2
    append(logdir, "t", 0, b"open", producer_id=11, producer_epoch=0,       # 3: still open
           base_sequence=0, is_transactional=True)
    with WireClient(server.address) as client:
        committed = fetch(client, [("t", 0, 0)], isolation=READ_COMMITTED
                          ).responses[0].partitions[0]
        uncommitted = fetch(client, [("t", 0, 0)]).responses[0].partitions[0]
        latest = client.call(LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": READ_COMMITTED, "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    assert committed.last_stable_offset == 3 and committed.high_watermark == 4
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(9, 1)]
    assert committed.records == stored_batches(log, 0, 3)
    assert uncommitted.records == stored_batches(log, 0, 4)
    assert latest.topics[0].partitions[0].offset == 3


def test_an_offset_beyond_the_log_end_is_offset_out_of_range(logdir: LogDir,
                                                             server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    append(logdir, "t", 0, b"a")
    with WireClient(server.address) as client:
        beyond, missing = fetch(client, [("t", 0, 2), ("t", 0, 1), ("u", 0, 0)]).responses
    assert beyond.partitions[0].error_code == ErrorCode.offset_out_of_range
    assert beyond.partitions[1].error_code == ErrorCode.none
    assert beyond.partitions[1].records == b""
    assert missing.partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_every_answer_is_sessionless_and_an_incremental_fetch_is_session_not_found(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        new_session = fetch(client, [("t", 0, 0)], session_epoch=0)
        incremental = fetch(client, [("t", 0, 0)], session_id=123, session_epoch=1)
    assert new_session.session_id == 0 and new_session.error_code == ErrorCode.none
    assert incremental.error_code == ErrorCode.fetch_session_id_not_found


def test_a_long_poll_is_answered_when_an_append_arrives(logdir: LogDir,
                                                         server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    timer = threading.Timer(0.3, lambda: append(logdir, "t", 0, b"late"))
    timer.start()
    try:
        with WireClient(server.address) as client:
            start = time.monotonic()
            answer = fetch(client, [("t", 0, 0)], max_wait=8000).responses[0].partitions[0]
            waited = time.monotonic() - start
    finally:
        timer.join()
    assert answer.records != b""
    assert 0.25 <= waited < 4


def test_a_long_poll_without_data_is_answered_after_max_wait(logdir: LogDir,
                                                             server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        start = time.monotonic()
        answer = fetch(client, [("t", 0, 0)], max_wait=400).responses[0].partitions[0]
        waited = time.monotonic() - start
    assert answer.records == b""
    assert 0.35 <= waited < 3


def test_a_parked_fetch_does_not_hold_other_connections(logdir: LogDir,
                                                        server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as parked, WireClient(server.address) as other:
        correlation, request = parked.request_bytes(FETCH, 12, {
            "max_wait": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
            "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        parked.send(request)
        start = time.monotonic()
        answer = fetch(other, [("t", 0, 0)]).responses[0].partitions[0]
        assert time.monotonic() - start < 2
        assert answer.records == b""
        appended = time.monotonic()
        append(logdir, "t", 0, b"wake")
        woken = parked.read_response(FETCH, 12, correlation).responses[0].partitions[0]
        assert time.monotonic() - appended < 2.5     # woken by the append, not max_wait
    assert woken.records != b""


def test_a_fetch_of_a_real_magic_0_log_returns_each_message_once(
        tmp_path: Path, serve: Serve) -> None:
    # an old broker's log (magic 0, no batch header): its offsets are the messages' own
    source = FIXTURES / "asayers__kafkalite" / "tests" / "test-data" / "fs-data" / "hamlet-none-0"
    shutil.copytree(source, tmp_path / "old" / "hamlet-0")
    directory = LogDir.open(tmp_path / "old", start_tasks=False)
    try:
        stored = (source / "00000000000000000000.log").read_bytes()
        server = serve(directory)
        with WireClient(server.address) as client:
            answer = fetch(client, [("hamlet", 0, 0)], max_bytes=4 << 20,
                           partition_max_bytes=4 << 20)
        part = answer.responses[0].partitions[0]
        assert part.error_code == ErrorCode.none
        assert part.records == stored            # every message, once, as stored
    finally:
        directory.close()
