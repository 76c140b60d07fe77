"""How ``cluster.spark.decoding.arrow_batches`` cuts and fills the Arrow batches of a Spark read:
unit level, real v2 batches, no Spark, no Ray."""

from __future__ import annotations

from cluster.spark.decoding import DEFAULT_BYTES_PER_BATCH, arrow_batches
from storage.records import Compression, Record, RecordBatch, build_batch

TS = 1_700_000_000_000


def test_an_arrow_batch_of_large_values_is_cut_by_bytes_not_only_rows() -> None:
    """40,000 values of 2 KiB (80 MiB, far below the 65,536 rows of an Arrow batch): batches are
    cut once their stored batches reach ``DEFAULT_BYTES_PER_BATCH``, so a read of large values
    never holds a whole rowsPerBatch of them (nor overflows Arrow's int32 offsets)."""
    per_batch, value = 500, bytes(range(256)) * 8
    data = [build_batch([Record(value=value, timestamp=TS)] * per_batch, base_offset=base)
            for base in range(0, 40_000, per_batch)]
    stored = len(data[0])
    out = list(arrow_batches([RecordBatch(d) for d in data], "big", 0, 0, 40_000,
                             columns=["offset", "value"]))
    assert len(out) > 1
    for batch in out:
        assert batch.column("value").nbytes <= DEFAULT_BYTES_PER_BATCH + stored
    assert [o for b in out for o in b.column("offset").to_pylist()] == list(range(40_000))
    assert all(v == value for b in out for v in b.column("value").to_pylist())


def test_keys_and_values_of_many_stored_batches_are_gathered_in_order_with_their_nulls() -> None:
    """One Arrow batch over plain and gzip batches, null keys and values and empty ones, cut at
    both ends of the offset range: every key and value in offset order, as the records hold."""
    records, data = [], []
    for base in range(0, 60, 10):
        batch = [Record(key=None if i % 4 == 0 else b"k%d" % i,
                        value=None if i % 7 == 0 else (b"" if i % 5 == 0 else b"v%d" % i * 3),
                        timestamp=TS + i) for i in range(base, base + 10)]
        codec = Compression.GZIP if base == 20 else Compression.NONE
        data.append(build_batch(batch, base_offset=base, compression=codec))
        records.extend(batch)
    out = list(arrow_batches([RecordBatch(d) for d in data], "t", 1, 3, 57))
    assert len(out) == 1
    assert out[0].column("key").to_pylist() == [r.key for r in records[3:57]]
    assert out[0].column("value").to_pylist() == [r.value for r in records[3:57]]
    assert out[0].column("offset").to_pylist() == list(range(3, 57))
