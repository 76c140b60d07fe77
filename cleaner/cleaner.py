"""``Cleaner``: one clean of one log (Kafka's Cleaner in LogCleaner.scala).

1. Build the offset map over the dirty section ``[first_dirty, first_uncleanable)``: key hash ->
   latest offset, stopping when the map is full (a partly mapped segment is fine, KAFKA-3894).
   ``end_offset = map.latest_offset + 1`` is where the next clean starts. The batches of aborted
   transactions (from the ``.txnindex`` files) never enter the map, and the dirty section never
   reaches past the segment holding the last stable offset.
2. Group every segment below ``end_offset`` (the clean section too) into runs that fit one segment
   (``segment.bytes``, ``segment.index.bytes``, a 32-bit offset span).
3. Clean each group into one ``<first base>.log.cleaned`` segment, keeping a record when it is past
   the map, or is the latest of its key and is not a tombstone past its delete horizon; unkeyed
   records are dropped and counted. Batches keep their base offset, so every kept record keeps its
   offset; a batch left without records (or already empty) stays, as an empty batch, only while it
   is an active producer's last batch or the last batch of the round (its next offset is the first
   uncleanable offset), and is dropped by the first clean after that. Tombstones get a delete horizon
   (``now + delete.retention.ms``) the first time a clean keeps them (KIP-534). Transactions follow
   Kafka's CleanedTransactionMetadata (cleaner/txn_metadata.py): an aborted transaction's batches
   are dropped; an abort marker stays while a batch of its transaction remains (and its entry is
   written to the cleaned segment's ``.txnindex``), a commit marker while its transaction's data
   does; a marker no longer needed gets a delete horizon and goes in a clean after it.
4. Swap each group in with ``Log.replace_segments`` (the crash-safe rename order).

Reading segments is ``cleaner.segment_reader``; what is kept of each batch, and the rewrite of a
batch, is ``cleaner.batch_filter``; the per-record work on runs of plain batches (v2, uncompressed,
no transaction), mapping and filtering, is ``cleaner.kernels``; this module drives a clean (the
offset map, the groups, the swap). ``check_done`` runs at every chunk; when it raises (an abort),
the ``.cleaned`` files are deleted and the log is exactly as before. Memory: the offset map plus
the read buffer and the output buffer of one chunk, which grow only up to ``max.message.bytes``
for one oversized batch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from cleaner.batch_filter import (ChunkOutput, LastBatches, LastRecord, empty_batch, filter_batch,
                                  filter_plain_batches, retain_empty)
from cleaner.config import CleanerConfig
from cleaner.errors import CleanerIOError
from cleaner import kernels
from cleaner.kernels import DONE, EMPTY, MAP_FULL
from cleaner.offset_map import OffsetMap
from cleaner.segment_reader import (Records, batch_header, control_type, following_bases,
                                    read_chunks)
from cleaner.stats import CleanerStats, CleanerStatsSnapshot
from cleaner.throttler import Throttler
from cleaner.txn_metadata import CleanedTransactionMetadata
from storage import files
from storage.clock import SYSTEM_CLOCK, Clock
from storage.files import TopicPartition
from storage.log import Log
from storage.records import (HEADER_SIZE, BatchHeader, BatchScan, build_batch_columns,
                             scan_batches)
from storage.segment import LogSegment, SegmentIdentity

logger = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
_CONTROL_FLAG = 0x20


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one clean did. ``next_dirty_offset`` is the new cleaner checkpoint."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    first_uncleanable_offset: int
    next_dirty_offset: int
    stats: CleanerStatsSnapshot
    groups: int


class Cleaner:
    """The cleaning algorithm. Owns one offset map; one clean at a time (not thread-safe)."""

    def __init__(self, config: CleanerConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 throttler: Throttler | None = None, offset_map: OffsetMap | None = None,
                 check_done: Callable[[TopicPartition], None] | None = None,
                 cleaner_id: int = 0) -> None:
        self.config = config or CleanerConfig()
        self.clock = clock
        self.cleaner_id = cleaner_id
        self.offset_map = offset_map or OffsetMap(self.config.map_memory_per_cleaner,
                                                  self.config.dedupe_buffer_load_factor)
        self.throttler = throttler or Throttler(self.config.max_io_bytes_per_second, clock=clock)
        self.check_done = check_done or (lambda _tp: None)
        self.io_buffer_size = max(self.config.io_buffer_per_cleaner, HEADER_SIZE)
        self._output = np.empty(0, dtype=np.uint8)

    # ---- entry point -------------------------------------------------------------------------
    def clean(self, log: Log, first_dirty_offset: int, now_ms: int | None = None,
              first_uncleanable_offset: int | None = None) -> CleanResult:
        """Clean ``log`` from ``first_dirty_offset`` up to ``first_uncleanable_offset`` (default:
        the active segment's base offset, or the base of the segment holding the log's last
        stable offset when that is lower). Raises LogCleaningAbortedError when ``check_done``
        does, and ``CleanerIOError`` on an I/O error (its ``.cleaned`` files then removed and
        their descriptors closed, the log as it was)."""
        now = self.clock.milliseconds() if now_ms is None else now_ms
        end = log.active_segment.base_offset if first_uncleanable_offset is None else min(
            first_uncleanable_offset, log.active_segment.base_offset)
        stable = getattr(log, "last_stable_offset", end)
        if first_uncleanable_offset is None and stable < end:
            # never past the first unstable offset (an open transaction may still abort): stop
            # at the base of the segment holding it, as Kafka's calculateCleanableBytes does
            end = log.segments_in_range(stable, stable + 1)[0].base_offset
        try:
            return self._clean(log, first_dirty_offset, now, end)
        except OSError as err:
            raise io_error(log, err, log.dir) from err

    def _clean(self, log: Log, first_dirty_offset: int, now: int, end: int) -> CleanResult:
        tp = log.topic_partition
        stats = CleanerStats(self.clock)
        legacy_horizon = self._legacy_delete_horizon(log, first_dirty_offset)
        # what the segments are before anything is read: the swap is refused if one changes
        seen = {s.base_offset: s.identity for s in log.segments_in_range(0, end)}
        following = following_bases(log.segments())
        self.build_offset_map(log, first_dirty_offset, end, stats, following)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        groups = group_segments_by_size(log.segments_in_range(0, end_offset),
                                        log.config.segment_bytes, log.config.segment_index_bytes,
                                        end_offset)
        producers = LastBatches(lambda: self._last_batches_of_producers(
            log, self.clock.milliseconds()))
        txns = CleanedTransactionMetadata()    # carried from group to group, as in Kafka
        for i, group in enumerate(groups):
            next_base = groups[i + 1][0].base_offset if i + 1 < len(groups) else end
            self.clean_segments(log, group, now, stats, legacy_horizon, end, producers, seen,
                                next_base, txns, following)
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return CleanResult(tp, first_dirty_offset, end, end_offset, stats.snapshot(), len(groups))

    def _legacy_delete_horizon(self, log: Log, first_dirty: int) -> int:
        before = [s for s in log.segments() if s.base_offset < first_dirty]
        if not before:
            return 0
        return before[-1].last_modified_ms - log.config.delete_retention_ms

    # ---- offset map --------------------------------------------------------------------------
    def build_offset_map(self, log: Log, start: int, end: int, stats: CleanerStats,
                         following: Mapping[int, int] | None = None) -> None:
        """Map key -> latest offset over [start, end), stopping when the map is full.
        ``following`` maps each segment's base offset to the next segment's (default: read
        from the log), the bound its offsets are checked against."""
        self.offset_map.clear()
        following = following_bases(log.segments()) if following is None else following
        dirty = log.segments_in_range(start, end)
        txns = CleanedTransactionMetadata()
        txns.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            self.check_done(log.topic_partition)
            if self._map_segment(log, segment, start, next_start, stats, txns, following):
                logger.debug("offset map of %s full: %d segments fully mapped, segment %d partly",
                          log.name, i, segment.base_offset)
                return

    def _map_segment(self, log: Log, segment: LogSegment, start: int, next_start: int,
                     stats: CleanerStats, txns: CleanedTransactionMetadata,
                     following: Mapping[int, int]) -> bool:
        """Returns True when the map filled up inside this segment. The batches of aborted
        transactions (``txns``) are read but never enter the map (Kafka's
        buildOffsetMapForSegment)."""
        position = segment.offset_index.lookup(start).position
        for chunk_position, chunk, scan in self._chunks(log, segment, position,
                                                        following=following):
            data = np.frombuffer(chunk, dtype=np.uint8)
            i, count = 0, len(scan)
            while i < count:
                progress = self.offset_map.put_batches(data, scan, i, count, start)
                stats.index_messages_read(progress.consumed)
                if progress.next > i:   # the transactions see the run as one batch
                    txns.on_batch_read(-1, int(scan.last_offsets[progress.next - 1]), False)
                if progress.status == MAP_FULL:
                    return True
                i = progress.next
                if progress.status == DONE:
                    break
                if self._map_batch(log, segment, start, stats, txns, chunk, chunk_position, scan,
                                   i):
                    return True
                i += 1
            stats.index_bytes_read(scan.valid_bytes)
        self.offset_map.update_latest_offset(next_start - 1)
        return False

    def _map_batch(self, log: Log, segment: LogSegment, start: int, stats: CleanerStats,
                   txns: CleanedTransactionMetadata, chunk: bytes, chunk_position: int,
                   scan: BatchScan, i: int) -> bool:
        """The map's per-batch path (what the kernel does not take): batch ``i`` of ``scan``.
        Returns True when the map filled up inside it."""
        pos, size, magic = int(scan.positions[i]), int(scan.sizes[i]), int(scan.magics[i])
        header = batch_header(chunk, pos, size, magic, log, segment, chunk_position + pos)
        if header.is_control:
            txns.on_control_batch_read(header.producer_id, header.last_offset,
                                       control_type(chunk, pos, size, header))
            stats.index_messages_read(1)
        elif txns.on_batch_read(header.producer_id, header.last_offset,
                                header.is_transactional):
            stats.index_messages_read(max(header.records_count, 0))
        else:
            batch = Records.read(chunk, pos, size, header, log, segment, chunk_position + pos)
            n = batch.count
            offsets = batch.offsets()
            lengths = np.where(offsets >= start, batch.key_len, -1)
            consumed = self.offset_map.put_batch(batch.buf, batch.key_start, lengths, offsets)
            stats.index_messages_read(consumed)
            if consumed < n:
                return True
        if header.last_offset >= start:
            self.offset_map.update_latest_offset(header.last_offset)
        return False

    def _chunks(self, log: Log, segment: LogSegment, position: int, *, check_crc: bool = True,
                following: Mapping[int, int] | None = None
                ) -> Iterator[tuple[int, bytes, BatchScan]]:
        """``segment_reader.read_chunks`` with this cleaner's buffer, throttler and check."""
        return read_chunks(log, segment, position, buffer_size=self.io_buffer_size,
                           max_message_size=self.config.max_message_size,
                           check_done=self.check_done, throttler=self.throttler,
                           check_crc=check_crc, following=following)

    # ---- cleaning ----------------------------------------------------------------------------
    def clean_segments(self, log: Log, group: Sequence[LogSegment], now_ms: int,
                       stats: CleanerStats, legacy_horizon: int, upper_bound: int,
                       last_batch_of_producer: LastBatches,
                       seen: Mapping[int, SegmentIdentity] | None = None,
                       next_base: int | None = None,
                       txns: CleanedTransactionMetadata | None = None,
                       following: Mapping[int, int] | None = None) -> None:
        """Clean one group into one ``.cleaned`` segment and swap it in. ``seen`` holds the
        segments' identities from before the clean read them; the swap is refused
        (``SegmentsChangedError``) when one of them changed since. ``next_base`` (default
        ``upper_bound``) is where the segments after the group begin.

        Transactions follow Kafka's cleanSegments: the aborted transactions overlapping each
        source segment are read from the ``.txnindex`` files, batches of aborted transactions are
        dropped, markers are kept or given a delete horizon (``CleanedTransactionMetadata``), and
        every aborted transaction whose marker stays is written to the cleaned segment's
        ``.txnindex``, which is swapped in with it. ``txns`` is the transaction state carried over
        from the previous groups of this clean (default: none).

        Every source batch is checked as the readers check it (CRC, and offsets against its
        neighbours and the next segment's base offset, from ``following``, default: read from
        the log); one that fails stops the clean with ``CorruptSegmentError`` before anything
        is swapped in, and the ``.cleaned`` files are deleted."""
        following = following_bases(log.segments()) if following is None else following
        cleaned = log.create_cleaned_segment(group[0].base_offset)
        txns = txns or CleanedTransactionMetadata()
        txns.cleaned_index = cleaned.txn_index
        next_base = upper_bound if next_base is None else next_base
        try:
            for i, source in enumerate(group):
                source_end = group[i + 1].base_offset if i + 1 < len(group) else next_base
                txns.add_aborted_transactions(
                    log.collect_aborted_transactions(source.base_offset, source_end))
                retain_legacy_deletes = source.last_modified_ms > legacy_horizon
                self._clean_into(log, source, cleaned, now_ms, stats, retain_legacy_deletes,
                                 upper_bound, last_batch_of_producer, txns, following)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified_ms(group[-1].last_modified_ms)
            self.check_done(log.topic_partition)
            expected = None if seen is None else [seen.get(s.base_offset, s.identity)
                                                  for s in group]
            log.replace_segments([cleaned], list(group), expected)
        except BaseException as err:
            try:
                if cleaned.suffix == files.CLEANED_SUFFIX:   # a swap past its rename: recovery's
                    cleaned.delete_files()
            except OSError as delete_error:
                logger.warning("%s: could not remove the cleaned segment's files: %s",
                               cleaned.log_path, delete_error)
            if isinstance(err, OSError):
                raise io_error(log, err, cleaned.log_path) from err
            raise

    def _last_batches_of_producers(self, log: Log, now_ms: int) -> dict[int, LastRecord]:
        """Active producer id -> its last record (Kafka's lastRecordsOfActiveProducers): the
        last offset of its last data batch, and its epoch. A marker with a newer epoch than the
        data before it clears the data offset (the epoch bump resets the producer's batches), so
        that marker is the producer's last record. That batch keeps its place (as an empty batch
        if need be) so the producer's sequence and epoch survive the clean. A producer whose last
        batch is ``producer.id.expiration.ms`` older than ``now_ms`` (the clock, as Kafka's
        producer state expires by wall time, not by the clean's ``currentTime``) is no longer
        active."""
        last: dict[int, tuple[int | None, int, int]] = {}
        for segment in log.segments():
            for _position, _chunk, scan in self._chunks(log, segment, 0, check_crc=False):
                with_producer = np.flatnonzero(scan.producer_ids >= 0)
                for pid, offset, timestamp, epoch, attributes in zip(
                        scan.producer_ids[with_producer].tolist(),
                        scan.last_offsets[with_producer].tolist(),
                        scan.max_timestamps[with_producer].tolist(),
                        scan.producer_epochs[with_producer].tolist(),
                        scan.attributes[with_producer].tolist()):
                    if not attributes & _CONTROL_FLAG:
                        last[pid] = (offset, epoch, timestamp)
                    else:
                        data_offset, last_epoch, _ = last.get(pid, (None, epoch, timestamp))
                        last[pid] = (data_offset if epoch == last_epoch else None, epoch,
                                     timestamp)
        expiration = self.config.producer_id_expiration_ms
        return {pid: LastRecord(offset, epoch) for pid, (offset, epoch, timestamp) in last.items()
                if now_ms - timestamp < expiration}

    def _clean_into(self, log: Log, source: LogSegment, dest: LogSegment, now_ms: int,
                    stats: CleanerStats, retain_legacy_deletes: bool, upper_bound: int,
                    last_batch_of_producer: LastBatches,
                    txns: CleanedTransactionMetadata | None = None,
                    following: Mapping[int, int] | None = None) -> None:
        txns = txns or CleanedTransactionMetadata()
        for chunk_position, chunk, scan in self._chunks(log, source, 0, following=following):
            written = ChunkOutput(self._output_buffer(len(chunk)))
            lookup = self.offset_map.lookup()
            data = np.frombuffer(chunk, dtype=np.uint8)
            i, count = 0, len(scan)
            while i < count:
                run = filter_plain_batches(lookup, data, scan, i, count, now_ms, upper_bound,
                                           written, stats)
                if run.next > i:   # the transactions see the run as one batch
                    txns.on_batch_read(-1, int(scan.last_offsets[run.next - 1]), False)
                i = run.next
                if run.status == DONE:
                    break
                if run.status == EMPTY:
                    header = BatchHeader.parse(chunk, int(scan.positions[i]))
                    if retain_empty(header, upper_bound, last_batch_of_producer):
                        written.add(empty_batch(header), 0, header.max_timestamp,
                                    header.last_offset, stats)
                    i += 1
                    continue
                self._clean_batch(log, source, chunk, chunk_position, scan, i, now_ms, stats,
                                  retain_legacy_deletes, upper_bound, last_batch_of_producer,
                                  txns, written)
                i += 1
            if written.pieces:
                dest.append(written.last_offset, written.max_timestamp,
                            written.offset_of_max_timestamp, written.pieces)
                self.throttler.maybe_throttle(written.size)

    def _clean_batch(self, log: Log, source: LogSegment, chunk: bytes, chunk_position: int,
                     scan: BatchScan, i: int, now_ms: int, stats: CleanerStats,
                     retain_legacy_deletes: bool, upper_bound: int,
                     last_batch_of_producer: LastBatches, txns: CleanedTransactionMetadata,
                     written: ChunkOutput) -> None:
        """The clean's per-batch path (what the kernel does not take): batch ``i`` of ``scan``
        filtered by ``batch_filter.filter_batch`` into ``written``."""
        pos, size, magic = int(scan.positions[i]), int(scan.sizes[i]), int(scan.magics[i])
        header = batch_header(chunk, pos, size, magic, log, source, chunk_position + pos)
        stats.read_messages(max(header.records_count, 0), size)
        records = None if header.is_control else Records.read(
            chunk, pos, size, header, log, source, chunk_position + pos)
        if header.is_control:
            can_discard = txns.on_control_batch_read(
                header.producer_id, header.last_offset, control_type(chunk, pos, size, header))
        else:
            can_discard = header.magic >= 2 and txns.on_batch_read(
                header.producer_id, header.last_offset, header.is_transactional)
        out = filter_batch(self.offset_map, chunk, pos, size, header, records, now_ms, stats,
                           retain_legacy_deletes, log.config.delete_retention_ms, upper_bound,
                           last_batch_of_producer, can_discard)
        if out is not None:
            data, count, batch_max_ts = out
            written.add(data, count, batch_max_ts, header.last_offset, stats)

    def _output_buffer(self, size: int) -> np.ndarray:
        """The buffer a chunk's kept batches are written to: reused from chunk to chunk, grown to
        the largest chunk read (so bounded by the I/O buffer, or one oversized batch)."""
        if len(self._output) < size:
            self._output = np.empty(size, dtype=np.uint8)
        return self._output


def io_error(log: Log, err: OSError, where: Path) -> CleanerIOError:
    """The ``CleanerIOError`` for ``err``, naming the file it names (else ``where``)."""
    path = str(err.filename or where)
    return CleanerIOError(f"{path}: the clean of partition {log.name} failed on an I/O error "
                          f"({err.strerror or err}); its cleaned segment was removed and the "
                          f"log is as it was", path=path, partition=log.name, errno=err.errno)


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive runs whose log bytes fit ``segment.bytes``, whose
    offset and time index bytes each fit ``segment.index.bytes``, and whose offsets span at most
    2^31-1 from the group's *first* base offset (so every offset fits the cleaned segment's 32-bit
    relative offsets). A segment's last offset is bounded by the next segment's base - 1 (or
    ``first_uncleanable_offset - 1`` for the last one); an empty segment always joins."""
    groups: list[list[LogSegment]] = []
    remaining = list(segments)
    while remaining:
        first = remaining.pop(0)
        group = [first]
        log_size = first.size
        index_size = _index_bytes(first.offset_index.path)
        time_index_size = _index_bytes(first.time_index.path)
        while remaining:
            candidate = remaining[0]
            next_last = (remaining[1].base_offset - 1 if len(remaining) > 1
                         else first_uncleanable_offset - 1)
            if (log_size + candidate.size > max_size
                    or index_size + _index_bytes(candidate.offset_index.path) > max_index_size
                    or time_index_size + _index_bytes(candidate.time_index.path) > max_index_size
                    or (candidate.size > 0 and next_last - group[0].base_offset > INT32_MAX)):
                break
            group.append(remaining.pop(0))
            log_size += candidate.size
            index_size += _index_bytes(candidate.offset_index.path)
            time_index_size += _index_bytes(candidate.time_index.path)
        groups.append(group)
    return groups


def _index_bytes(path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def warm_up() -> None:
    """Compile (or load from cache) the cleaner's kernels (``cleaner.kernels``, the offset
    map's) once, at process start."""
    data = build_batch_columns([b"k", None], [b"v", b"w"], np.zeros(2, np.int64))
    batches = np.frombuffer(bytes(data) * 2, dtype=np.uint8)
    scan = scan_batches(batches)
    offset_map = OffsetMap(1 << 16)
    offset_map.put_batches(batches, scan, 0, len(scan), 0)
    lookup = offset_map.lookup()
    kernels.filter_batches(lookup.table, lookup.table_slots, lookup.k0, lookup.k1,
                           lookup.latest_offset, batches, scan.positions, scan.sizes,
                           scan.last_offsets, 0, len(scan), 0, 1 << 40,
                           np.empty(len(batches), np.uint8), 0, np.empty(len(scan), np.int64),
                           np.empty(kernels.RESULT_FIELDS, np.int64))
    kernels.first_misplaced_batch(scan.base_offsets, scan.last_offsets, -1, 1 << 40)
    kernels.gather_records(batches, np.zeros(1, np.int64), np.ones(1, np.int64),
                           np.ones(1, np.bool_), np.zeros(16, np.uint8))
