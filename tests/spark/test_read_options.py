"""The options of the ``strata`` source without Spark: one table of known options, Kafka's names
beside ours, refusal by name of anything unknown, unsupported or out of place, Kafka's order of
precedence for the starting options, and the split of ``maxOffsetsPerTrigger``."""

from __future__ import annotations

import pickle

import pytest

from cluster.spark import options as opts
from cluster.spark.errors import DataLossError, SourceOptionError
from cluster.spark.offsets import (Bounds, checked_start, limit_ends, resolve_end,
                                   resolve_start)


def test_every_option_the_parsers_read_is_in_the_table() -> None:
    import inspect
    import re

    from cluster.spark import reader, source, stream, writer

    known = {s.name for s in opts.KNOWN_OPTIONS}
    text = "".join(inspect.getsource(m) for m in (opts, source, reader, writer, stream))
    read = set(re.findall(r'_get\(options, "(\w+)"', text))
    read |= set(re.findall(r'(?:positive_int|boolean)\(options, "(\w+)"', text))
    assert read and read <= known, read - known


@pytest.mark.parametrize("options, operation, message", [
    ({"topic": "t", "startingOfsets": "earliest"}, opts.BATCH_READ, "unknown option"),
    ({"topic": "t", "endingOffsets": "latest"}, opts.STREAM_READ, "does not apply to a stream"),
    ({"topic": "t", "maxOffsetsPerTrigger": "5"}, opts.BATCH_READ, "does not apply to a batch"),
    ({"topic": "t", "batchBytes": "5"}, opts.STREAM_READ, "does not apply to a stream read"),
    ({"topic": "t", "startingOffsets": "earliest"}, opts.WRITE, "does not apply to a write"),
    ({"topic": "t", "subscribePattern": "o.*"}, opts.STREAM_READ, "is not supported"),
    ({"topic": "t", "maxOffsetsPerTrigger": "5", "maxRecordsPerTrigger": "6"}, opts.STREAM_READ,
     "are the same option"),
    ({"topic": "t", "isolation": "read_committed",
      "kafka.isolation.level": "read_committed"}, opts.BATCH_READ, "are the same option"),
])
def test_an_option_that_would_be_ignored_is_refused_naming_it(options, operation,
                                                              message) -> None:
    with pytest.raises(SourceOptionError, match=message) as raised:
        opts.check_options(options, operation)
    assert raised.value.option
    again = pickle.loads(pickle.dumps(raised.value))
    assert again.option == raised.value.option and str(again) == str(raised.value)


@pytest.mark.parametrize("options, message", [
    ({"namespce": "strata"}, r"unknown option 'namespce' of the strata-stats source \(did you "
                             r"mean namespace\?\); known: address, namespace$"),
    ({"topic": "orders"}, "option topic does not apply to a stats read of the strata-stats "
                          "source"),
    ({"startingOffsets": "earliest"}, "option startingOffsets does not apply to a stats read"),
    ({"subscribe": "orders"}, "unknown option 'subscribe' of the strata-stats source"),
])
def test_the_stats_source_refuses_any_option_but_its_connection_naming_it(options,
                                                                          message) -> None:
    with pytest.raises(SourceOptionError, match=message) as raised:
        opts.check_options(options, opts.STATS_READ)
    assert raised.value.option == next(iter(options)) or raised.value.option == "startingOffsets"
    opts.check_options({"Address": "auto", "namespace": "strata"}, opts.STATS_READ)


@pytest.mark.parametrize("options, message, partition", [
    ({"startingOffsets": "latest"}, "startingOffsets can't be latest for a batch read", None),
    ({"startingOffsets": "LATEST"}, "startingOffsets can't be latest for a batch read", None),
    ({"startingOffsets": '{"t": {"0": 5, "1": -1}}'},
     r"startingOffsets for t-1 can't be latest \(-1\) for a batch read", 1),
    ({"endingOffsets": "earliest"}, "endingOffsets can't be earliest for a batch read", None),
    ({"endingOffsets": '{"2": -2}'},
     r"endingOffsets for t-2 can't be earliest \(-2\) for a batch read", 2),
])
def test_a_batch_read_refuses_a_start_at_latest_and_an_end_at_earliest_as_kafka(
        options, message, partition) -> None:
    """Kafka's ``KafkaSourceProvider.validateBatchOptions``: a batch query may not start at the
    latest offset nor end at the earliest, globally or for one partition of the JSON."""
    with pytest.raises(SourceOptionError, match=message) as raised:
        opts.read_settings({"topic": "t", **options}, opts.BATCH_READ)
        opts.ending_offsets({"topic": "t", **options}, "t")
    assert raised.value.option == next(iter(options))
    assert getattr(raised.value, "partition", None) == partition
    again = pickle.loads(pickle.dumps(raised.value))
    assert str(again) == str(raised.value)


def test_a_start_at_latest_is_fine_for_a_stream_and_a_timestamp_takes_precedence() -> None:
    assert opts.read_settings({"topic": "t", "startingOffsets": "latest"},
                              opts.STREAM_READ).position.default == opts.LATEST
    both = {"topic": "t", "startingOffsets": "latest", "startingTimestamp": "5"}
    assert opts.read_settings(both, opts.BATCH_READ).position.timestamp == 5
    assert opts.ending_offsets({"endingOffsets": '{"0": -1, "1": 7}'}, "t") == {0: -1, 1: 7}


def test_option_names_are_case_insensitive_and_take_kafkas_name_too() -> None:
    lowered = {"topic": "t", "maxoffsetspertrigger": "7", "failondataloss": "false"}
    opts.check_options(lowered, opts.STREAM_READ)
    assert opts.max_offsets_per_trigger(lowered) == 7
    assert opts.fail_on_data_loss(lowered) is False
    assert opts.isolation({"kafka.isolation.level": "read_uncommitted"}) == "read_uncommitted"
    assert opts.isolation({}) == "read_committed"
    opts.check_options({"topic": "t", "checkpointLocation": "/ck", "flush": "true"}, opts.WRITE)


def test_starting_options_take_kafkas_precedence() -> None:
    both = {"startingTimestamp": "5", "startingOffsetsByTimestamp": '{"0": 9}',
            "startingOffsets": "latest"}
    assert opts.starting_position(both, "t", opts.LATEST).timestamp == 5
    del both["startingTimestamp"]
    assert opts.starting_position(both, "t", opts.LATEST).timestamps == {0: 9}
    del both["startingOffsetsByTimestamp"]
    assert opts.starting_position(both, "t", opts.EARLIEST).default == opts.LATEST
    assert opts.starting_position({}, "t", opts.LATEST).default == opts.LATEST
    assert opts.starting_position({}, "t", opts.EARLIEST).default == opts.EARLIEST
    with pytest.raises(SourceOptionError, match="startingTimestamp"):
        opts.starting_position({"startingTimestamp": "yesterday"}, "t", opts.LATEST)
    with pytest.raises(SourceOptionError, match="error or latest"):
        opts.starting_position({"startingOffsetsByTimestampStrategy": "first"}, "t", opts.LATEST)


def test_ending_offsets_refuse_earliest_and_stop_at_the_last_stable_offset() -> None:
    with pytest.raises(SourceOptionError, match="earliest"):
        opts.ending_offsets({"endingOffsets": "earliest"}, "t")
    ends = opts.ending_offsets({"endingOffsets": '{"t": {"0": 40, "1": -1}}'}, "t")
    bounds = {0: Bounds(0, 50, 30), 1: Bounds(0, 20, 20), 2: Bounds(5, 9, 9)}
    assert resolve_end("t", ends, bounds, opts.READ_COMMITTED) == {0: 30, 1: 20, 2: 9}
    assert resolve_end("t", ends, bounds, opts.READ_UNCOMMITTED) == {0: 40, 1: 20, 2: 9}
    with pytest.raises(SourceOptionError, match="beyond its log end offset 50"):
        resolve_end("t", {0: 51}, bounds, opts.READ_UNCOMMITTED)
    with pytest.raises(SourceOptionError, match=r"partitions \[7\]"):
        resolve_end("t", {7: 1}, bounds, opts.READ_UNCOMMITTED)


def test_data_loss_names_the_partition_and_offsets_or_moves_to_the_log_start() -> None:
    bounds = Bounds(log_start=150, log_end=200, last_stable=200)
    with pytest.raises(DataLossError) as raised:
        checked_start("aged", 0, 100, bounds, fail_on_data_loss=True)
    err = pickle.loads(pickle.dumps(raised.value))
    assert (err.topic, err.partition, err.requested_offset, err.log_start_offset) == \
        ("aged", 0, 100, 150)
    assert "aged-0: offset 100 is gone" in str(err)
    assert checked_start("aged", 0, 100, bounds, fail_on_data_loss=False) == 150
    assert checked_start("aged", 0, 260, bounds, fail_on_data_loss=False) == 200
    assert checked_start("aged", 0, 170, bounds, fail_on_data_loss=True) == 170


def test_max_offsets_per_trigger_is_split_in_proportion_and_never_exceeded() -> None:
    starts = {0: 0, 1: 100, 2: 50}
    ends = {0: 300, 1: 200, 2: 50}
    limited = limit_ends(starts, ends, 120)
    assert sum(limited[p] - starts[p] for p in ends) == 120
    assert limited == {0: 90, 1: 130, 2: 50}
    assert limit_ends(starts, ends, 1000) == ends
    one = limit_ends({0: 0, 1: 0, 2: 0}, {0: 1, 1: 1, 2: 1}, 2)
    assert sum(one.values()) == 2                         # rounding never adds an offset
    assert limit_ends({0: 5}, {0: 5, 1: 10}, 4) == {0: 5, 1: 4}   # a new partition from 0


def test_a_task_whose_start_retention_deleted_since_the_plan_reports_data_loss(tmp_path) -> None:
    """Planning saw offset 0; before the task ran, retention deleted the segments holding it. The
    task fails naming the offsets (failOnDataLoss=true), or reads from the first offset still
    held (false), as Kafka's source does when a fetch finds its offsets gone."""
    from pyspark.sql.types import StructField, StructType

    from cluster.spark.decoding import FIXED_COLUMNS
    from cluster.spark.reader import ReadPartition, read_partition
    from storage.config import LogConfig
    from storage.log import Log
    from storage.records import Record

    import time

    config = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)
    log = Log.open(tmp_path / "aged-0", config)
    now = int(time.time() * 1000)
    for i in range(60):
        log.append([Record(key=b"k", value=b"%d" % i, timestamp=now)])
    end = log.log_end_offset
    planned = [ReadPartition("aged", 0, str(log.dir), config, 0, end, opts.READ_COMMITTED, fail)
               for fail in (True, False)]
    cut = log.segment_base_offsets()[2]
    log.maybe_increment_log_start_offset(cut)
    assert log.delete_old_segments() == 2
    schema = StructType([StructField(name, StructType()) for name in FIXED_COLUMNS])
    with pytest.raises(DataLossError, match=f"aged-0: offset 0 is gone.* log start offset is "
                                            f"{cut}"):
        list(read_partition(planned[0], schema, "binary", 1000))
    rows = [v for b in read_partition(planned[1], schema, "binary", 1000)
            for v in b.column("value").to_pylist()]
    assert rows == [b"%d" % i for i in range(cut, end)]
    log.close()


@pytest.mark.parametrize("option, raw, what, missing", [
    ("startingOffsets", '{"0": 5}', "-2 for earliest, -1 for latest", [1, 2]),
    ("startingOffsets", '{"t": {"0": 5, "2": -2}}', "-2 for earliest, -1 for latest", [1]),
    ("startingOffsetsByTimestamp", '{"0": 1700000000000}', "a timestamp for each", [1, 2]),
])
def test_a_starting_json_that_leaves_out_partitions_is_refused_naming_them(
        option, raw, what, missing) -> None:
    """Kafka's source asserts that a per-partition start names every partition; the ones left
    out would otherwise read from earliest without anyone having asked for it."""
    position = opts.starting_position({option: raw}, "t", opts.EARLIEST)
    bounds = {p: Bounds(0, 10, 10) for p in range(3)}
    with pytest.raises(SourceOptionError, match=f"option {option} must name every partition "
                                                f"of topic t") as raised:
        resolve_start(None, "t", position, bounds, opts.READ_UNCOMMITTED, True)
    assert what in str(raised.value) and raised.value.option == option
    assert raised.value.missing == missing and f"missing: {missing}" in str(raised.value)
    whole = opts.starting_position({"startingOffsets": '{"0": 5, "1": -2, "2": -1}'}, "t",
                                   opts.EARLIEST)
    assert resolve_start(None, "t", whole, bounds, opts.READ_UNCOMMITTED, True) == \
        {0: 5, 1: 0, 2: 10}
