"""``spark.readStream.format("strata")`` and the read options, against a real local Ray cluster and
a real SparkSession: restarts from the query's checkpoint (exact counts: nothing twice, nothing
skipped), a query stopped mid-run, startingTimestamp, failOnDataLoss, maxOffsetsPerTrigger,
partitions added mid-stream, read_committed over transactional data, and options refused by name."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from storage.producer_state import ORIGIN_COORDINATOR
from storage.records import ControlType, Record, build_batch, build_end_txn_marker

T0 = int(time.time() * 1000) - 60_000     # recent: retention (7 days) never removes a record


class Stream:
    """A streaming copy of a topic into Parquet files, with its checkpoint, run to completion
    (``Trigger.AvailableNow``) or started and stopped."""

    def __init__(self, strata: Any, tmp_path: Path, topic: str, **options: Any) -> None:
        self.strata = strata
        self.topic = topic
        self.out = str(tmp_path / "out")
        self.checkpoint = str(tmp_path / "checkpoint")
        self.options = {"startingOffsets": "earliest", **options}

    def _query(self, **extra: Any) -> Any:
        reader = self.strata.spark.readStream.format("strata").option("topic", self.topic) \
            .option("namespace", self.strata.namespace)
        for key, value in {**self.options, **extra}.items():
            reader = reader.option(key, str(value))
        return reader.load().writeStream.format("parquet").option("path", self.out) \
            .option("checkpointLocation", self.checkpoint)

    def run(self, **extra: Any) -> Any:
        query = self._query(**extra).trigger(availableNow=True).start()
        query.awaitTermination(180)
        if query.exception() is not None:
            raise query.exception()
        return query

    def start(self, **extra: Any) -> Any:
        return self._query(**extra).trigger(processingTime="0 seconds").start()

    def rows(self) -> list[tuple[int, int, bytes]]:
        """(partition, offset, value) of every row the sink committed."""
        df = self.strata.spark.read.parquet(self.out)
        return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def produce(cluster: Any, topic: str, partition: int, values: range | list[int],
            timestamp: int | None = None) -> None:
    cluster.produce(topic, partition, [
        Record(key=b"k%d" % v, value=b"%d" % v, timestamp=T0 + v if timestamp is None
               else timestamp) for v in values])


def values_of(rows: list[tuple[int, int, bytes]]) -> list[int]:
    return sorted(int(v) for _, _, v in rows)


def data_rows(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


# ---- restarts ----------------------------------------------------------------------------------
def test_a_stream_restarted_from_its_checkpoint_reads_every_record_once(strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("orders", partitions=2)
    produce(c, "orders", 0, range(0, 300))
    produce(c, "orders", 1, range(300, 500))
    stream = Stream(strata, tmp_path, "orders")
    stream.run()
    assert values_of(stream.rows()) == list(range(500))
    produce(c, "orders", 0, range(500, 650))
    produce(c, "orders", 1, range(650, 700))
    stream.run()
    rows = stream.rows()
    assert values_of(rows) == list(range(700))
    assert len({(p, o) for p, o, _ in rows}) == 700
    stream.run()                                          # nothing new: nothing added
    assert len(stream.rows()) == 700


def test_a_query_stopped_mid_run_resumes_where_its_last_batch_ended(strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("clicks", partitions=2)
    produce(c, "clicks", 0, range(0, 1000))
    produce(c, "clicks", 1, range(1000, 2000))
    stream = Stream(strata, tmp_path, "clicks", maxOffsetsPerTrigger=150)
    query = stream.start()
    deadline = time.monotonic() + 120
    while len(data_rows(query)) < 3:
        assert time.monotonic() < deadline and query.exception() is None, query.exception()
        time.sleep(0.2)
    query.stop()
    partial = stream.rows()
    assert 0 < len(partial) < 2000                        # stopped mid-run
    produce(c, "clicks", 1, range(2000, 2100))
    stream.run(maxOffsetsPerTrigger=100_000)
    rows = stream.rows()
    assert values_of(rows) == list(range(2100))
    assert len({(p, o) for p, o, _ in rows}) == 2100


def test_max_offsets_per_trigger_splits_the_backlog_into_micro_batches(strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("backlog", partitions=2)
    produce(c, "backlog", 0, range(0, 300))
    produce(c, "backlog", 1, range(300, 500))
    stream = Stream(strata, tmp_path, "backlog", maxOffsetsPerTrigger=120)
    query = stream.run()
    assert data_rows(query) == [120, 120, 120, 120, 20]
    assert values_of(stream.rows()) == list(range(500))
    ours = Stream(strata, tmp_path / "ours", "backlog", maxRecordsPerTrigger=250)
    assert data_rows(ours.run()) == [250, 250]


def test_a_partition_added_mid_stream_is_read_from_its_start(strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("grow", partitions=1)
    produce(c, "grow", 0, range(0, 100))
    stream = Stream(strata, tmp_path, "grow")
    stream.run()
    c.add_partitions("grow", 3)
    produce(c, "grow", 1, range(100, 150))
    produce(c, "grow", 2, range(150, 170))
    produce(c, "grow", 0, range(170, 180))
    stream.run()
    rows = stream.rows()
    assert values_of(rows) == list(range(180))
    assert {p for p, _, _ in rows} == {0, 1, 2}


# ---- where a read starts -------------------------------------------------------------------------
def test_starting_timestamp_starts_each_partition_at_its_first_record_at_or_after_it(
        strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("events", partitions=2)
    produce(c, "events", 0, range(0, 100))                # timestamps T0 + value
    produce(c, "events", 1, range(100, 200))
    stream = Stream(strata, tmp_path, "events", startingTimestamp=T0 + 150,
                    startingOffsetsByTimestampStrategy="latest")
    stream.options.pop("startingOffsets")
    stream.run()
    assert values_of(stream.rows()) == list(range(150, 200))   # partition 0 has none: latest
    batch = strata.read("events", startingTimestamp=T0 + 50,
                        startingOffsetsByTimestampStrategy="latest")
    assert sorted(int(r.value) for r in batch.collect()) == list(range(50, 200))


def test_starting_timestamp_after_every_record_fails_naming_the_partition_by_default(
        strata) -> None:
    c = strata.cluster
    c.create_topic("late", partitions=1)
    produce(c, "late", 0, range(10))
    with pytest.raises(Exception, match="no record of late-0 has a timestamp at or after"):
        strata.read("late", startingTimestamp=T0 + 10).collect()


def test_starting_offsets_by_timestamp_and_ending_offsets_bound_a_batch_read(strata) -> None:
    c = strata.cluster
    c.create_topic("window", partitions=2)
    produce(c, "window", 0, range(0, 100))
    produce(c, "window", 1, range(100, 200))
    starts = '{"0": %d, "1": %d}' % (T0 + 20, T0)
    read = strata.read("window", startingOffsetsByTimestamp=starts,
                       endingOffsets='{"window": {"0": 30, "1": -1}}')
    assert sorted(int(r.value) for r in read.collect()) == \
        list(range(20, 30)) + list(range(100, 200))


# ---- data loss ---------------------------------------------------------------------------------
def test_a_checkpoint_below_the_log_start_fails_or_skips_with_fail_on_data_loss(
        strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("aged", partitions=1)
    produce(c, "aged", 0, range(0, 100))
    stream = Stream(strata, tmp_path, "aged")
    stream.run()
    produce(c, "aged", 0, range(100, 200))
    assert c.delete_records("aged", 0, before_offset=150) == 150
    with pytest.raises(StreamingQueryException) as failed:
        stream.run()
    message = str(failed.value)
    assert "aged-0: offset 100 is gone" in message and "log start offset is 150" in message
    assert "failOnDataLoss=false" in message
    assert values_of(stream.rows()) == list(range(100))   # nothing of the failed batch
    stream.run(failOnDataLoss="false")
    assert values_of(stream.rows()) == list(range(100)) + list(range(150, 200))


def test_a_batch_read_from_an_offset_below_the_log_start_is_data_loss(strata) -> None:
    c = strata.cluster
    c.create_topic("trimmed", partitions=1)
    produce(c, "trimmed", 0, range(0, 50))
    c.delete_records("trimmed", 0, before_offset=20)
    with pytest.raises(Exception, match="trimmed-0: offset 5 is gone"):
        strata.read("trimmed", startingOffsets='{"0": 5}').collect()
    lenient = strata.read("trimmed", startingOffsets='{"0": 5}', failOnDataLoss="false")
    assert sorted(int(r.value) for r in lenient.collect()) == list(range(20, 50))


# ---- read_committed ----------------------------------------------------------------------------
def _append_as_node(actor: Any, topic: str, partition: int, data: bytes, marker: bool) -> int:
    """Runs inside the node actor: append a transactional batch, or a marker as the transaction
    coordinator would (the node API has no coordinator yet)."""
    log = actor.log_dir.log(topic, partition)
    info = log.append_batch(data, origin=ORIGIN_COORDINATOR) if marker else log.append_batch(data)
    return info.last_offset


class Transactions:
    def __init__(self, cluster: Any, topic: str, partition: int = 0) -> None:
        self.node = cluster.node(cluster.partition_dir(topic, partition))
        self.topic, self.partition = topic, partition
        self.sequences: dict[int, int] = {}

    def send(self, producer: int, values: range) -> None:
        seq = self.sequences.get(producer, 0)
        data = build_batch([Record(key=b"k", value=b"%d" % v, timestamp=T0) for v in values],
                           producer_id=producer, producer_epoch=0, base_sequence=seq,
                           is_transactional=True)
        self.sequences[producer] = seq + len(values)
        self.node.call("__ray_call__", _append_as_node, self.topic, self.partition, data, False,
                       timeout=60)

    def end(self, producer: int, commit: bool) -> None:
        data = build_end_txn_marker(ControlType.COMMIT if commit else ControlType.ABORT,
                                    producer_id=producer, producer_epoch=0, coordinator_epoch=0,
                                    timestamp=T0)
        self.node.call("__ray_call__", _append_as_node, self.topic, self.partition, data, True,
                       timeout=60)


def test_reads_are_read_committed_by_default_and_streams_stop_at_the_last_stable_offset(
        strata, tmp_path) -> None:
    c = strata.cluster
    c.create_topic("txn", partitions=1)
    txns = Transactions(c, "txn")
    produce(c, "txn", 0, range(0, 10))
    txns.send(1, range(1000, 1010))                       # aborted below
    txns.send(2, range(10, 20))                           # committed below
    txns.send(1, range(1010, 1020))
    txns.end(1, commit=False)
    txns.end(2, commit=True)
    txns.send(3, range(20, 30))                           # still open
    produce(c, "txn", 0, range(30, 40))                   # above the last stable offset
    lso = c.describe_topic("txn")[0].last_stable_offset
    assert lso < c.offsets("txn", 0)[1]

    def batch(**options: Any) -> list[int]:
        return sorted(int(r.value) for r in strata.read("txn", **options).collect())

    assert batch() == list(range(0, 20))
    assert batch(isolation="read_uncommitted") == sorted(
        list(range(0, 40)) + list(range(1000, 1020)))
    assert batch(**{"kafka.isolation.level": "read_uncommitted"}) == \
        batch(isolation="read_uncommitted")
    stream = Stream(strata, tmp_path, "txn")
    stream.run()
    assert values_of(stream.rows()) == list(range(0, 20))
    txns.end(3, commit=True)
    stream.run()
    assert values_of(stream.rows()) == list(range(0, 40))


# ---- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("option, value, message", [
    ("startingOfsets", "earliest", "unknown option 'startingofsets' .*did you mean "
                                   "startingOffsets"),
    ("subscribe", "orders", "option subscribe of Kafka's source is not supported"),
    ("maxOffsetsPerTrigger", "10", "option maxOffsetsPerTrigger does not apply to a batch read"),
    ("compression", "gzip", "option compression does not apply to a batch read"),
    ("endingTimestamp", "5", "option endingTimestamp of Kafka's source is not supported"),
    ("isolation", "serializable", "option isolation must be read_committed or read_uncommitted"),
])
def test_a_batch_read_refuses_an_option_it_would_ignore_naming_it(strata, option, value,
                                                                   message) -> None:
    strata.cluster.create_topic("opts", partitions=1)
    with pytest.raises(Exception, match=message):
        strata.read("opts", **{option: value}).collect()


def test_a_stream_refuses_ending_offsets_and_a_write_refuses_read_options(strata,
                                                                         tmp_path) -> None:
    c = strata.cluster
    c.create_topic("strict", partitions=1)
    with pytest.raises(Exception, match="option endingOffsets does not apply to a stream read"):
        Stream(strata, tmp_path, "strict", endingOffsets="latest").run()
    df = strata.spark.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="option startingOffsets does not apply to a write"):
        strata.write(df, "strict", startingOffsets="earliest")
    assert c.offsets("strict", 0) == (0, 0)
