"""The Spark writer's columnar encoder (``cluster.spark.encoding.BatchEncoder``, which encodes
from Arrow buffers) against the record-by-record path (``storage.records.build_batch``): the same
rows give byte-identical batches. No Spark: the encoder is called on pyarrow arrays directly."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from cluster.client.partitioner import murmur2
from cluster.spark.encoding import PRODUCER_EPOCH, BatchEncoder, WritePlan
from storage.records import Compression, Record, RecordBatch, build_batch

NOW_MS = 1_700_000_000_000
PARTITIONS = 3
SPARK_PARTITION = 4


def _random_bytes(rng: random.Random, size: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(size))


def _value(rng: random.Random) -> bytes | None:
    kind = rng.random()
    if kind < 0.15:
        return None                                      # tombstone
    if kind < 0.3:
        return b""
    if kind < 0.35:
        return _random_bytes(rng, rng.randrange(5_000, 40_000))   # large
    return _random_bytes(rng, rng.randrange(1, 200))


def _rows(rng: random.Random, n: int, with_headers: bool) -> list[dict]:
    rows = []
    for i in range(n):
        key = None if rng.random() < 0.2 else (b"" if rng.random() < 0.05
                                               else _random_bytes(rng, rng.randrange(1, 40)))
        headers = None
        if with_headers and rng.random() < 0.5:
            headers = [{"key": f"h{j}", "value": None if rng.random() < 0.2
                        else _random_bytes(rng, rng.randrange(0, 30))}
                       for j in range(rng.randrange(0, 3))]
        rows.append({"key": key, "value": _value(rng), "timestamp": NOW_MS - 5_000 + i,
                     "headers": headers})
    return rows


def _expected_partitions(rows: list[dict]) -> list[int]:
    """Kafka's default partitioner as the writer applies it: murmur2 of the key, round robin over
    the rows without a key starting at the Spark partition."""
    out = []
    turn = SPARK_PARTITION % PARTITIONS
    for row in rows:
        if row["key"] is None:
            out.append(turn)
            turn = (turn + 1) % PARTITIONS
        else:
            out.append((murmur2(row["key"]) & 0x7FFFFFFF) % PARTITIONS)
    return out


@pytest.mark.parametrize("with_headers", [False, True])
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
@pytest.mark.parametrize("transactional", [False, True])
def test_columnar_encoder_builds_the_batches_build_batch_builds_for_the_same_rows(
        with_headers: bool, compression: Compression, transactional: bool) -> None:
    rng = random.Random(16 + with_headers)
    rows = _rows(rng, 1_500, with_headers)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    plan = WritePlan(topic="t", address="auto", namespace="n", partitions=PARTITIONS,
                     compact=False, max_message_bytes=1 << 20, segment_bytes=100_000,
                     batch_bytes=1 << 20, producer_nonce=7, has_key=True, has_value=True,
                     packed_columns=(), has_partition=False, has_timestamp=True,
                     has_headers=with_headers, compression=compression)
    producer_id = 99 if transactional else None
    encoder = BatchEncoder(plan, SPARK_PARTITION, now_ms=NOW_MS, producer_id=producer_id)
    arrow_batches = []
    for start in range(0, len(rows), 400):               # several Arrow batches, one of them sliced
        chunk = rows[start:start + 400]
        arrays = [pa.array([r["key"] for r in chunk], pa.binary()),
                  pa.array([r["value"] for r in chunk], pa.binary()),
                  pa.array([r["timestamp"] for r in chunk], pa.int64())]
        names = ["key", "value", "timestamp"]
        if with_headers:
            arrays.append(pa.array([r["headers"] for r in chunk], header_type))
            names.append("headers")
        arrow_batches.append(pa.RecordBatch.from_arrays(arrays, names))
    arrow_batches[1] = pa.concat_batches([arrow_batches[0], arrow_batches[1]]).slice(400)
    sent = list(encoder.batches(arrow_batches))

    partitions = _expected_partitions(rows)
    expected_pid = producer_id if transactional else plan.producer_id(SPARK_PARTITION)
    for partition in range(PARTITIONS):
        mine = [r for r, p in zip(rows, partitions) if p == partition]
        batches = [data for _, p, data in sent if p == partition]
        assert len(batches) > 1                          # segment.bytes split the partition
        sequence = 0
        for data in batches:
            count = RecordBatch(data).records_count
            records = [Record(r["key"], r["value"], r["timestamp"],
                              tuple((h["key"], h["value"]) for h in r["headers"] or ()))
                       for r in mine[sequence:sequence + count]]
            assert data == build_batch(records, producer_id=expected_pid,
                                       producer_epoch=PRODUCER_EPOCH, base_sequence=sequence,
                                       compression=compression, is_transactional=transactional)
            assert len(data) <= plan.segment_bytes
            sequence += count
        assert sequence == len(mine)
    assert encoder.rows == len(rows)
    assert sum(RecordBatch(d).records_count for _, _, d in sent) == len(rows)


def test_columnar_encoder_packs_columns_into_msgpack_values_as_before() -> None:
    """Without a value column each row's other columns become a msgpack map (the packed path
    goes through the same buffers)."""
    import msgpack

    plan = WritePlan(topic="t", address="auto", namespace="n", partitions=2, compact=False,
                     max_message_bytes=1 << 20, segment_bytes=1 << 30, batch_bytes=1 << 20,
                     producer_nonce=1, has_key=False, has_value=False,
                     packed_columns=("a", "b"), has_partition=True, has_timestamp=False,
                     has_headers=False)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([1, 2, 3]), pa.array(["x", None, "zz"]), pa.array([1, None, 0], pa.int32())],
        ["a", "b", "partition"])
    sent = list(BatchEncoder(plan, 0, now_ms=NOW_MS).batches([batch]))
    got = {p: [msgpack.unpackb(r.value) for r in RecordBatch(d).records()] for _, p, d in sent}
    # row 1 has no partition and no key: round robin from Spark partition 0
    assert got == {0: [{"a": 2, "b": None}, {"a": 3, "b": "zz"}], 1: [{"a": 1, "b": "x"}]}
    assert np.all([RecordBatch(d).base_sequence == 0 for _, _, d in sent])


def test_a_record_whose_headers_alone_exceed_segment_bytes_is_refused_before_anything_is_sent(
        ) -> None:
    """The size check counts a record's headers: a row whose key and value are small but whose
    headers make a batch over the topic's segment.bytes is refused with the setting named, not
    encoded into a batch the log would refuse."""
    from cluster.spark.errors import WriteRejectedError

    plan = WritePlan(topic="small", address="auto", namespace="n", partitions=1, compact=False,
                     max_message_bytes=1 << 20, segment_bytes=2_000, batch_bytes=1 << 20,
                     producer_nonce=1, has_key=True, has_value=True, packed_columns=(),
                     has_partition=False, has_timestamp=False, has_headers=True)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"k", b"big"]), pa.array([b"v", b"v"]),
         pa.array([[], [{"key": "h", "value": bytes(1_000)}, {"key": "i", "value": bytes(1_000)}]],
                  header_type)],
        ["key", "value", "headers"])
    with pytest.raises(WriteRejectedError, match=r"row 1 of Spark partition 0 \(key b'big'\) "
                                                 r"makes a record batch of 2\d{3} bytes, over "
                                                 r"segment.bytes=2000 of topic small"):
        list(BatchEncoder(plan, 0, now_ms=NOW_MS).batches([batch]))
