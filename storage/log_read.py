"""Reading records from a log: the fetch result and the record iterator above ``Log.read_raw``.

Owns ``FetchData`` (whole batches of one segment, what ``Log.read_raw`` returns), the isolation
levels, ``read_records`` (``Log.read``: data records across segments, skipping control batches,
and for ``read_committed`` stopping at the last stable offset and skipping aborted transactions),
``fetch_offset_by_timestamp`` (ListOffsets) and ``AbortedFilter``, the consumer-side rule that
skips an aborted transaction's batches (Kafka's ``CompletedFetch``).

These read a log as a client does, through its public reads (``FetchableLog``); reading the
segments themselves is ``LocalLog.read``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Protocol

from storage import files
from storage.config import READ_COMMITTED, READ_UNCOMMITTED
from storage.errors import StorageError
from storage.records import ControlType, Record, RecordBatch, parse_control_record
from storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from storage.segment import LogSegment

DEFAULT_FETCH_BYTES = 1024 * 1024
EARLIEST_TIMESTAMP = -2     # Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP: the log start offset
LATEST_TIMESTAMP = -1       # Kafka's ListOffsetsRequest.LATEST_TIMESTAMP: the last fetchable offset
MAX_TIMESTAMP = -3          # Kafka's ListOffsetsRequest.MAX_TIMESTAMP (KIP-734)
READ_CANDIDATES = 8         # segments a read takes at a time (compaction can leave empty ones)


@dataclass(frozen=True, slots=True)
class FetchData:
    """Whole batches read from one segment: ``data`` starts at ``position`` of the file ``path``.

    The segment checked every batch's CRC and offsets when it read them; a decoder in another
    process checks the CRC again (``RecordBatch.records`` does), and its errors name ``path``."""

    segment_base_offset: int
    position: int
    data: bytes
    path: str | None = None

    def batches(self) -> Iterator[RecordBatch]:
        """The batches of ``data``, each knowing its file and position for error messages."""
        from storage.records import iter_batches
        path = None if self.path is None else Path(self.path)
        return iter_batches(self.data, path=path, base_position=self.position)


class FetchableLog(Protocol):
    """The reads of a partition log that ``read_records`` and ``fetch_offset_by_timestamp``
    make (``Log`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    def segments(self) -> list[LogSegment]: ...

    def read_raw(self, start_offset: int, max_bytes: int = ...,
                 min_one_message: bool = ...) -> FetchData | None: ...

    def read(self, start_offset: int | None = ..., max_offset: int | None = ...,
             fetch_bytes: int = ..., isolation: str = ...) -> Iterator[Record]: ...

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int
                                     ) -> list[AbortedTxn]: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...


def read_records(log: FetchableLog, start_offset: int | None, max_offset: int | None, fetch_bytes: int,
                 isolation: str) -> Iterator[Record]:
    """``Log.read`` (see its contract): a generator, so its arguments are checked at the first
    ``next``."""
    if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
        raise StorageError(f"{log.name}: isolation {isolation!r} is not "
                           f"{READ_UNCOMMITTED!r} or {READ_COMMITTED!r}",
                           partition=log.name, isolation=isolation)
    committed = isolation == READ_COMMITTED
    if start_offset is not None:
        start_offset = files.validate_offset(start_offset, "start_offset",
                                             partition=log.name, minimum=None)
    if max_offset is not None:
        max_offset = files.validate_offset(max_offset, "max_offset", partition=log.name)
    offset = log.log_start_offset if start_offset is None else start_offset
    upper = log.last_stable_offset if committed else log.log_end_offset
    stop = upper if max_offset is None else min(max_offset, upper)
    aborted = AbortedFilter(log.collect_aborted_transactions(offset, stop)
                            if committed and offset < stop else [])
    while offset < stop:
        fetch = log.read_raw(offset, fetch_bytes)
        if fetch is None:
            return
        progressed = False
        for batch in fetch.batches():
            if batch.last_offset < offset:
                continue
            if not (aborted.skips(batch) or batch.is_control):
                for record in batch.records():
                    if offset <= record.offset < stop:
                        yield record
            offset = max(offset, batch.next_offset)
            progressed = True
            if offset >= stop:
                return
        if not progressed:
            return


class AbortedFilter:
    """A read_committed reader's view of aborted transactions (Kafka's consumer, CompletedFetch):
    a producer's transactional batches are skipped from the first offset of its aborted
    transaction until its abort marker."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset, reverse=True)
        self._producers: set[int] = set()

    def skips(self, batch: RecordBatch) -> bool:
        """Whether ``batch`` belongs to an aborted transaction (its abort marker included)."""
        if not self._pending and not self._producers:
            return False
        if batch.producer_id < 0:
            return False
        while self._pending and self._pending[-1].first_offset <= batch.last_offset:
            self._producers.add(self._pending.pop().producer_id)
        producer_id = batch.producer_id
        if producer_id not in self._producers:
            return False
        if batch.is_control:
            records = batch.records()
            if records and parse_control_record(records[0])[0] == ControlType.ABORT:
                self._producers.discard(producer_id)
            return True
        return batch.is_transactional


def fetch_offset_by_timestamp(log: FetchableLog, timestamp: int, isolation: str
                              ) -> tuple[int, int] | None:
    """``Log.fetch_offset_by_timestamp`` (Kafka's ``Partition.fetchOffsetForTimestamp`` over
    ``UnifiedLog.fetchOffsetByTimestamp``): ``(offset, timestamp)``, the timestamp -1 where
    Kafka answers NO_TIMESTAMP, or None.

    ``EARLIEST_TIMESTAMP`` (-2): the log start offset. ``LATEST_TIMESTAMP`` (-1): the last
    fetchable offset, the last stable offset for ``read_committed`` and the high watermark
    otherwise. ``MAX_TIMESTAMP`` (-3): the first record with the largest timestamp. A time in
    ms: the first record with a timestamp at or after it. The last two only below the last
    fetchable offset, so a ``read_committed`` client is never pointed into an open
    transaction."""
    if isolation not in (READ_UNCOMMITTED, READ_COMMITTED):
        raise StorageError(f"{log.name}: isolation {isolation!r} is not "
                           f"{READ_UNCOMMITTED!r} or {READ_COMMITTED!r}",
                           partition=log.name, isolation=isolation)
    timestamp = files.validate_offset(timestamp, "timestamp", partition=log.name, minimum=-3)
    fetchable = log.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
    if timestamp == EARLIEST_TIMESTAMP:
        return log.log_start_offset, -1
    if timestamp == LATEST_TIMESTAMP:
        return fetchable, -1
    found = _max_timestamp_record(log) if timestamp == MAX_TIMESTAMP \
        else log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable:
        return None
    return found


def _max_timestamp_record(log: FetchableLog) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record holding the log's largest timestamp (Kafka:
    the segment with the largest ``maxTimestampSoFar``, then the batch with that timestamp, then
    its first record with it)."""
    segments = [s for s in log.segments() if s.size > 0 and s.max_timestamp_so_far >= 0]
    if not segments:
        return None
    segment = max(segments, key=lambda s: s.max_timestamp_so_far)
    largest = segment.max_timestamp_so_far
    start = max(segment.offset_of_max_timestamp_so_far, log.log_start_offset)
    # the index entry may sit below the log start offset (moved inside a batch): read from there
    for record in log.read(max(segment.walk_start(start).offset, log.log_start_offset)):
        if record.timestamp == largest:
            return record.offset, record.timestamp
    return None
