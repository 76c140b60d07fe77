"""DataFrame rows (Arrow record batches, as Spark hands them to a writer task) -> RecordBatch v2
batches for the partitions of one topic, stamped as an idempotent producer.

Input columns (``WritePlan`` says which are present; the planner checked their types):

* ``key``: BINARY or STRING; null = no key (refused for a compacted topic);
* ``value``: BINARY or STRING; null = tombstone. Without a ``value`` column every other column
  is packed, per row, into a msgpack map ``{column: value}`` that becomes the value (TIMESTAMP
  as a msgpack Timestamp, DATE as ISO text, DECIMAL as a float64);
* ``partition`` INT (optional; null or absent = Kafka's default partitioner: murmur2 of the key,
  round robin for rows without a key), ``timestamp`` TIMESTAMP or BIGINT ms (optional; absent or
  null = the time of the write), ``headers`` ARRAY<STRUCT<key: STRING, value: BINARY>> (optional).

Exactly once under Spark task retries, two ways:

* transactional (``WritePlan.txn``, the default): every task attempt is a member of the job's
  transaction with a producer id of its own (``BatchEncoder(producer_id=...)``), and writes
  transactional batches; the job's commit commits the attempts that succeeded and aborts the
  others (``cluster.spark.writer``), so a failed attempt's rows are never read by a
  read_committed reader;
* idempotent (``transactional=false``): a task is one producer whose id is derived from the write
  job and the Spark partition (``producer_id``), epoch 0, and whose sequences count the records
  it sent to each log partition from 0. The batches depend only on the task's input rows and
  their order, so a retried task re-sends the same batches with the same sequences, and the log
  drops those it already holds (``storage.producer_state``); a batch is appended whole or not at
  all.

Columnar: keys and values are read straight from the Arrow buffers of each batch (``_Column``:
data, starts, lengths). murmur2 runs over the key buffer in one kernel call
(``partitions_for_buffer``), a stable argsort groups the rows per log partition, a pending batch
keeps the rows' slices of the Arrow buffers (no copy), and
``storage.record_builder.build_batch_slices`` encodes each record once, straight from those
buffers into the batch (the RecordBatch v2 layout stays in storage). The Python loop runs per
Arrow batch and per log partition, except for msgpack packing and headers, which are per record.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cluster.client.partitioner import partitions_for_buffer
from cluster.spark.errors import WriteRejectedError
from cluster.transactions.coordinator import TxnInfo
from cluster.client.txn_client import REGISTER_LOOKAHEAD_BYTES
from cluster.transactions.txn_state import DATA_EPOCH
from storage.kernels import MAX_RECORD_OVERHEAD, as_input
from storage.record_builder import RecordSlices, build_batch_slices, header_block
from storage.records import HEADER_SIZE, Compression

RESERVED_COLUMNS = ("key", "value", "partition", "timestamp", "headers")
PRODUCER_PARTITION_BITS = 24
PRODUCER_EPOCH = DATA_EPOCH   # 0: members append with it, markers fence with a later one
DEFAULT_BATCH_BYTES = 1 << 20
Encoded = tuple[str, int, bytes]    # (topic, partition, one v2 batch)


@dataclass(frozen=True)
class WritePlan:
    """What every writer task of one write job needs; made by the planner, pickled to the tasks."""

    topic: str
    address: str
    namespace: str
    partitions: int
    compact: bool
    max_message_bytes: int
    segment_bytes: int             # the topic's; a batch larger than a segment is refused too
    batch_bytes: int
    producer_nonce: int            # random per write job; see producer_id
    has_key: bool
    has_value: bool
    packed_columns: tuple[str, ...]
    has_partition: bool
    has_timestamp: bool
    has_headers: bool
    compression: Compression = Compression.NONE
    flush: bool = True
    txn: TxnInfo | None = None     # the job's transaction (None: idempotent, not atomic)

    def producer_id(self, spark_partition: int) -> int:
        """The producer id of one Spark partition of this job: the same for every attempt of
        the task, different for every other task and (with the random nonce) every other job."""
        if not 0 <= spark_partition < 1 << PRODUCER_PARTITION_BITS:
            raise WriteRejectedError(f"Spark partition id {spark_partition} is out of range",
                                     spark_partition=spark_partition)
        return (self.producer_nonce << PRODUCER_PARTITION_BITS) | spark_partition

    @property
    def largest_batch(self) -> tuple[int, str]:
        """The largest batch the topic accepts and the key that sets it: ``max.message.bytes``
        or ``segment.bytes``, whichever is smaller."""
        if self.segment_bytes < self.max_message_bytes:
            return self.segment_bytes, "segment.bytes"
        return self.max_message_bytes, "max.message.bytes"

    @property
    def batch_limit(self) -> int:
        return min(self.batch_bytes, self.largest_batch[0])

    @property
    def register_lookahead(self) -> int:
        """Bytes of batches a transactional task holds back so that it registers the partitions
        they go to in one call: about one batch per partition, at most 8 MiB."""
        return min(self.batch_limit * self.partitions, REGISTER_LOOKAHEAD_BYTES)


@dataclass(frozen=True)
class _Column:
    """A binary column as buffers: row i is ``data[starts[i]:starts[i] + lengths[i]]``, a length
    of -1 is null. ``data`` is a read-only ``uint8`` array (an Arrow buffer, not copied)."""

    data: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of_arrow(cls, column: pa.Array) -> _Column:
        column = _as_binary(column)
        n = len(column)
        _, offsets_buffer, data_buffer = column.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=n + 1,
                                offset=column.offset * 4).astype(np.int64)
        lengths = np.diff(offsets)
        if column.null_count:
            lengths[~column.is_valid().to_numpy(zero_copy_only=False)] = -1
        data = as_input(data_buffer if data_buffer is not None else b"")
        return cls(data, offsets[:-1], lengths)

    @classmethod
    def of_bytes(cls, items: list[bytes]) -> _Column:
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
        starts = np.cumsum(lengths) - lengths
        return cls(as_input(b"".join(items)), starts, lengths)

    @classmethod
    def nulls(cls, n: int) -> _Column:
        return cls(as_input(b""), np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64))

    def sizes(self) -> np.ndarray:
        """Bytes per row, 0 for null."""
        return np.maximum(self.lengths, 0)

    def row(self, i: int) -> bytes | None:
        length = int(self.lengths[i])
        if length < 0:
            return None
        start = int(self.starts[i])
        return self.data[start:start + length].tobytes()

    def slices(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(buffer, starts, lengths) of ``rows``, in their order; the bytes stay where they are."""
        return self.data, self.starts[rows], self.lengths[rows]


_NO_HEADERS = as_input(b"")


@dataclass
class _Pending:
    """The records of one log partition not yet sent, as slices of the Arrow buffers they came
    in, in record order (``build_batch_slices`` encodes them straight into the batch)."""

    pieces: list[RecordSlices] = field(default_factory=list)
    count: int = 0
    bound: int = HEADER_SIZE

    def __len__(self) -> int:
        return self.count

    def add(self, rows: np.ndarray, keys: _Column, values: _Column, headers: _Column | None,
            timestamps: np.ndarray) -> None:
        self.pieces.append(_slices(rows, keys, values, headers, timestamps))
        self.count += len(rows)


def _slices(rows: np.ndarray, keys: _Column, values: _Column, headers: _Column | None,
            timestamps: np.ndarray) -> RecordSlices:
    if headers is None:
        none = np.zeros(len(rows), dtype=np.int64)
        header_slices = (_NO_HEADERS, none, none)
    else:
        header_slices = headers.slices(rows)
    return RecordSlices(*keys.slices(rows), *values.slices(rows), *header_slices,
                        timestamps[rows])


class BatchEncoder:
    """Encodes one writer task's rows. Not thread-safe; one per task."""

    def __init__(self, plan: WritePlan, spark_partition: int, *,
                 now_ms: int | None = None, producer_id: int | None = None) -> None:
        """``producer_id``: a transaction member's own id (the batches are then transactional);
        default the job's idempotent id of ``spark_partition``."""
        self.plan = plan
        self.spark_partition = spark_partition
        self.transactional = producer_id is not None
        self.producer_id = plan.producer_id(spark_partition) if producer_id is None \
            else producer_id
        self._now_ms = now_ms
        self._sequences = [0] * plan.partitions
        self._pending: dict[int, _Pending] = {}
        self._round_robin = spark_partition % plan.partitions
        self._packer = msgpack.Packer(default=_msgpack_default)
        self.rows = 0
        self.batches_built = 0
        self.bytes_built = 0

    def batches(self, rows: Iterable[pa.RecordBatch]) -> Iterator[Encoded]:
        """``(topic, partition, v2 batch)`` in the order they must be appended (``Encoded``)."""
        for arrow_batch in rows:
            if arrow_batch.num_rows:
                yield from self._add(arrow_batch)
        for partition in sorted(self._pending):
            if self._pending[partition]:
                yield self._flush(partition)

    # ---- one Arrow batch -----------------------------------------------------------------------
    def _add(self, batch: pa.RecordBatch) -> Iterator[Encoded]:
        plan = self.plan
        n = batch.num_rows
        first_row = self.rows
        self.rows += n
        if plan.has_key:
            keys = _Column.of_arrow(batch.column("key"))
            if plan.compact and (keys.lengths < 0).any():
                row = first_row + int(np.flatnonzero(keys.lengths < 0)[0])
                raise WriteRejectedError(
                    f"row {row} of Spark partition {self.spark_partition} has a null key, but "
                    f"topic {plan.topic} is compacted (cleanup.policy=compact needs a key on "
                    f"every record)", topic=plan.topic, row=row)
        else:
            keys = _Column.nulls(n)
        if plan.has_value:
            values = _Column.of_arrow(batch.column("value"))
        else:
            pack = self._packer.pack
            try:
                packed = [pack(row) for row in batch.select(list(plan.packed_columns)).to_pylist()]
            except TypeError as err:
                raise WriteRejectedError(f"cannot pack the columns {list(plan.packed_columns)} "
                                         f"into msgpack: {err}", topic=plan.topic) from None
            values = _Column.of_bytes(packed)
        headers = (_Column.of_bytes([header_block(h) for h in self._headers(batch)])
                   if plan.has_headers else None)
        bounds = keys.sizes() + values.sizes() + MAX_RECORD_OVERHEAD
        if headers is not None:
            bounds += headers.lengths
        partitions = self._partitions(batch, keys, n)
        timestamps = self._timestamps(batch, n)
        self._check_sizes(bounds, keys, values, headers, timestamps, first_row)
        # numpy's stable sort of 16-bit integers is a radix sort: linear in the rows
        order = np.argsort(partitions.astype(np.uint16) if plan.partitions <= 1 << 16
                           else partitions, kind="stable")
        cuts = np.cumsum(np.bincount(partitions, minlength=plan.partitions))[:-1]
        for group in np.split(order, cuts):
            if not len(group):
                continue
            partition = int(partitions[group[0]])
            yield from self._append(partition, group, keys, values, headers, timestamps, bounds)

    def _append(self, partition: int, rows: np.ndarray, keys: _Column, values: _Column,
                headers: _Column | None, timestamps: np.ndarray,
                bounds: np.ndarray) -> Iterator[Encoded]:
        limit = self.plan.batch_limit
        pending = self._pending.setdefault(partition, _Pending())
        cumulative = np.cumsum(bounds[rows])
        i = 0
        while i < len(rows):
            done = int(cumulative[i - 1]) if i else 0
            fit = int(np.searchsorted(cumulative, done + limit - pending.bound, side="right")) - i
            if fit <= 0:
                if pending:
                    yield self._flush(partition)
                    pending = self._pending.setdefault(partition, _Pending())
                    continue
                fit = 1                      # a record that fits max.message.bytes only alone
            pending.add(rows[i:i + fit], keys, values, headers, timestamps)
            pending.bound += int(cumulative[i + fit - 1]) - done
            i += fit

    def _flush(self, partition: int) -> Encoded:
        plan = self.plan
        pending = self._pending.pop(partition)
        sequence = self._sequences[partition]
        data = build_batch_slices(pending.pieces, compression=plan.compression,
                                  producer_id=self.producer_id, producer_epoch=PRODUCER_EPOCH,
                                  base_sequence=sequence, is_transactional=self.transactional)
        self._sequences[partition] = sequence + len(pending)
        self.batches_built += 1
        self.bytes_built += len(data)
        return plan.topic, partition, data

    # ---- columns ---------------------------------------------------------------------------------
    def _partitions(self, batch: pa.RecordBatch, keys: _Column, n: int) -> np.ndarray:
        count = self.plan.partitions
        out = np.empty(n, dtype=np.int64)
        given = None
        if self.plan.has_partition:
            column = batch.column("partition")
            given = ~column.is_null().to_numpy(zero_copy_only=False)
            values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
            bad = given & ((values < 0) | (values >= count))
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise WriteRejectedError(
                    f"row {self.rows - n + row} of Spark partition {self.spark_partition} asks "
                    f"for partition {int(values[row])}, but topic {self.plan.topic} has "
                    f"partitions 0..{count - 1}", topic=self.plan.topic,
                    partition=int(values[row]))
            out[:] = values
        has_key = keys.lengths >= 0
        hashed = has_key if given is None else has_key & ~given
        if hashed.all():
            out[:] = partitions_for_buffer(keys.data, keys.starts, keys.lengths, count)
        elif hashed.any():
            where = np.flatnonzero(hashed)
            out[where] = partitions_for_buffer(keys.data, keys.starts[where], keys.lengths[where],
                                               count)
        spread = ~has_key if given is None else ~has_key & ~given
        if spread.any():
            where = np.flatnonzero(spread)
            out[where] = (self._round_robin + np.arange(len(where))) % count
            self._round_robin = (self._round_robin + len(where)) % count
        return out

    def _timestamps(self, batch: pa.RecordBatch, n: int) -> np.ndarray:
        now = self._now_ms if self._now_ms is not None else int(time.time() * 1000)
        if not self.plan.has_timestamp:
            return np.full(n, now, dtype=np.int64)
        column = batch.column("timestamp")
        if pa.types.is_timestamp(column.type):
            column = pc.cast(column.cast(pa.timestamp("ms", tz=column.type.tz)), pa.int64())
        else:
            column = column.cast(pa.int64())
        return column.fill_null(now).to_numpy(zero_copy_only=False).astype(np.int64)

    def _headers(self, batch: pa.RecordBatch) -> list[tuple[tuple[str, bytes | None], ...]]:
        out = []
        for row in batch.column("headers").to_pylist():
            if not row:
                out.append(())
                continue
            out.append(tuple((h["key"], h["value"].encode() if isinstance(h["value"], str)
                              else h["value"]) for h in row if h is not None))
        return out

    def _check_sizes(self, bounds: np.ndarray, keys: _Column, values: _Column,
                     headers: _Column | None, timestamps: np.ndarray, first_row: int) -> None:
        """Refuse a row whose record alone (headers included, uncompressed) makes a batch over
        the topic's limit; set the exact size as the bound of the other rows near it."""
        limit, key_name = self.plan.largest_batch
        for row in np.flatnonzero(bounds + HEADER_SIZE > limit):
            size = len(build_batch_slices([_slices(row.reshape(1), keys, values, headers,
                                                   timestamps)]))
            if size > limit:
                key = keys.row(int(row))
                shown = repr(key[:40]) + ("..." if key is not None and len(key) > 40 else "")
                raise WriteRejectedError(
                    f"row {first_row + int(row)} of Spark partition {self.spark_partition} "
                    f"(key {shown}) makes a record batch of {size} bytes, over "
                    f"{key_name}={limit} of topic {self.plan.topic}; nothing of it was "
                    f"sent", topic=self.plan.topic, row=first_row + int(row), size=size,
                    limit=limit, setting=key_name)
            bounds[row] = size - HEADER_SIZE


def _as_binary(column: pa.Array) -> pa.Array:
    if pa.types.is_binary(column.type):
        return column
    if pa.types.is_large_binary(column.type) or pa.types.is_string(column.type) \
            or pa.types.is_large_string(column.type):
        return column.cast(pa.binary())
    raise WriteRejectedError(f"a key or value column must be BINARY or STRING, not {column.type}",
                             type=str(column.type))


def _msgpack_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return msgpack.Timestamp.from_datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot pack {type(value).__name__} into msgpack")
