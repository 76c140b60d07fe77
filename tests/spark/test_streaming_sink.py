"""The ``strata`` streaming sink on a real local Spark session and Ray cluster: one transaction per
micro-batch, exactly once under a task failure and a replayed batch."""

from __future__ import annotations

import json
from pathlib import Path

from cluster.spark.sink import sink_id
from cluster.transactions.txn_state import TxnState

FILES = 3
ROWS_PER_FILE = 400


def _input(root: Path) -> Path:
    """Three JSON files of 400 rows each: one micro-batch each with maxFilesPerTrigger=1."""
    src = root / "in"
    src.mkdir()
    for f in range(FILES):
        lines = [json.dumps({"key": f"k{i}", "value": f"f{f}-{i}"})
                 for i in range(ROWS_PER_FILE)]
        (src / f"part-{f}.json").write_text("\n".join(lines) + "\n")
    return src


def _fail_first_attempt():
    """A UDF passing ``value`` through that raises in the first attempt of the task reading
    ``f1-200`` (micro-batch 1), after the rows before it went on to the writer."""
    from pyspark.sql import functions as F

    def passthrough(value: str) -> str:
        from pyspark import TaskContext

        if value == "f1-200" and TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("injected task failure in micro-batch 1")
        return value

    return F.udf(passthrough, "string")


def _run(strata, src: Path, ck: Path) -> None:
    spark = strata.spark
    stream = (spark.readStream.schema("key STRING, value STRING")
              .option("maxFilesPerTrigger", 1).json(str(src)))
    stream = stream.withColumn("value", _fail_first_attempt()("value"))
    query = (stream.writeStream.format("strata").option("topic", "events")
             .option("namespace", strata.namespace).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _values(c, isolation: str) -> list[str]:
    return [r.value.decode() for p in c.partitions("events")
            for r in c.consume("events", p, isolation=isolation)]


def test_a_streaming_write_with_a_failed_task_and_a_replayed_batch_has_no_duplicates(
        strata, tmp_path: Path) -> None:
    c = strata.cluster
    c.create_topic("events", partitions=2)
    src, ck = _input(tmp_path), tmp_path / "ck"
    expected = sorted(f"f{f}-{i}" for f in range(FILES) for i in range(ROWS_PER_FILE))

    _run(strata, src, ck)
    assert sorted(_values(c, "read_committed")) == expected
    sink = c.describe_transaction(sink_id({"checkpointLocation": str(ck)}))
    assert sink.state == TxnState.COMPLETE_COMMIT and sink.sink_batch == FILES - 1
    stored_before = len(_values(c, "read_uncommitted"))

    # Spark's way to force a replay: the last batch's commit file goes, the query restarts
    last = ck / "commits" / str(FILES - 1)
    assert last.exists()
    last.unlink()
    (ck / "commits" / f".{FILES - 1}.crc").unlink(missing_ok=True)   # its checksum too
    _run(strata, src, ck)

    assert sorted(_values(c, "read_committed")) == expected          # no duplicates
    replayed = c.describe_transaction(sink.transactional_id)
    assert replayed.state == TxnState.COMPLETE_ABORT and replayed.epoch > sink.epoch
    assert replayed.sink_batch == FILES - 1
    assert len(_values(c, "read_uncommitted")) == stored_before + ROWS_PER_FILE   # re-appended
    assert all(c.last_stable_offset("events", p) == c.offsets("events", p)[1]
               for p in c.partitions("events"))
