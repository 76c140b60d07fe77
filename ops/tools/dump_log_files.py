"""``strata dump-log`` of the files beside a segment: offset and time indexes (with Kafka's
cross-check against the ``.log``), producer snapshots, transaction indexes and text checkpoints,
each read with storage's definition of its format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ops.tools import UsageError
# the layouts are storage's, one definition per format (index entries are read where needed:
# storage.index imports numpy, which the CLI does not load to start)
from ops.tools.dump_log_common import (
    DumpOptions,
    EPOCH_CHECKPOINT,
    KAFKA_MAX_MESSAGE_SIZE,
    Trailers,
    _segment_base,
    _sibling,
    read_only,
)

if TYPE_CHECKING:
    from storage.index import OffsetIndex, TimeIndex
    from storage.producer_state import SnapshotEntry


# ---- indexes, snapshots, checkpoints (dump) ----------------------------------------------------
def _index_base(path: Path) -> int:
    base = _segment_base(path)
    if base is None:
        raise UsageError(f"{path}: an index file name must start with its 20-digit base offset")
    return base


def _preallocated_only(data: bytes | memoryview) -> bool:
    """Every slot of the index is zero: the preallocated file of an active segment that has no
    entry yet. Its zeroed tail starts at slot 0 (no index writes an entry for the segment's
    first batch, at position 0), so it holds no entry; Kafka's dump would read slot 0 as one."""
    return not bytes(data).rstrip(b"\0")


def _no_entries_yet(name: str, slots: int, opts: DumpOptions, doc: dict[str, Any],
                    out: TextIO) -> dict[str, Any]:
    doc["preallocatedSlots"] = slots
    if not opts.verify_index_only and not opts.json:
        out.write(f"{name} holds no entries yet ({slots} preallocated zeroed slots: the index of "
                  "an active segment).\n")
    return doc


def _dump_index(path: Path, name: str, kind: str, opts: DumpOptions, trailers: Trailers,
                out: TextIO, err: TextIO) -> dict[str, Any]:
    from storage.index import OFFSET_ENTRY, OffsetIndex

    base = _index_base(path)
    data = read_only(path)
    count = len(data) // OFFSET_ENTRY.size
    doc: dict[str, Any] = {"baseOffset": base, "entries": []}
    if count == 0:
        if not opts.json:
            out.write(f"{name} is empty.\n")
        return doc
    if opts.index_sanity_check:
        return _sanity_check(OffsetIndex(path, base, writable=False), name, doc, trailers, opts, out,
                             err)
    if _preallocated_only(data):
        return _no_entries_yet(name, count, opts, doc, out)
    log_data = _sibling_log(path, name, err, opts, doc)
    mismatches: list[tuple[int, int]] = []
    for i in range(count):
        relative, position = OFFSET_ENTRY.unpack_from(data, i * OFFSET_ENTRY.size)
        offset = base + relative
        if relative == 0 and i > 0:
            break                  # the zeroed, preallocated tail of an index never trimmed
        if log_data is not None:
            found = _first_batch_last_offset(log_data, position, KAFKA_MAX_MESSAGE_SIZE)
            if found != offset:
                mismatches.append((offset, found))
        if not opts.verify_index_only and not opts.json:
            out.write(f"offset: {offset} position: {position}\n")
        doc["entries"].append({"offset": offset, "position": position})
    if mismatches:
        trailers.index_mismatches[str(path.absolute())] = mismatches[::-1]   # Kafka: newest first
        if opts.verify_index_only:
            trailers.damaged_files.append(name)
    doc["mismatches"] = [{"indexOffset": a, "logOffset": b} for a, b in mismatches]
    return doc


def _sanity_check(index: OffsetIndex | TimeIndex, name: str, doc: dict[str, Any],
                  trailers: Trailers, opts: DumpOptions, out: TextIO,
                  err: TextIO) -> dict[str, Any]:
    """``--index-sanity-check``: Kafka's sanity check of one index, and nothing else."""
    from storage.errors import CorruptIndexError

    try:
        index.sanity_check()
    except CorruptIndexError as error:
        trailers.damaged_files.append(name)
        if not opts.json:
            err.write(f"{name} failed sanity check: {error}\n")
        return {**doc, "sanityCheck": str(error)}
    if not opts.json:
        out.write(f"{name} passed sanity check.\n")
    return {**doc, "sanityCheck": "passed"}


def _sibling_log(path: Path, name: str, err: TextIO, opts: DumpOptions,
                 doc: dict[str, Any]) -> memoryview | None:
    log_path = _sibling(path, ".log")
    if not log_path.is_file():
        doc.setdefault("errors", []).append(f"no {log_path.name} beside it")
        if not opts.json:
            err.write(f"{name}: no {log_path.name} beside it; entries are not checked\n")
        return None
    return read_only(log_path)


def _first_batch_last_offset(log_data: memoryview, position: int, limit: int) -> int:
    """The last offset of the first batch at ``position`` within ``limit`` bytes, else -1."""
    from storage.errors import CorruptRecordError
    from storage.records import iter_batches

    if not 0 <= position < len(log_data):
        return -1
    try:
        batch = next(iter_batches(log_data[:position + limit], position), None)
    except CorruptRecordError:
        return -1
    return -1 if batch is None else batch.last_offset


def _dump_time_index(path: Path, name: str, kind: str, opts: DumpOptions, trailers: Trailers,
                     out: TextIO, err: TextIO) -> dict[str, Any]:
    from storage.errors import CorruptRecordError
    from storage.index import TIME_ENTRY, OffsetIndex, TimeIndex
    from storage.records import iter_batches

    base = _index_base(path)
    data = read_only(path)
    doc: dict[str, Any] = {"baseOffset": base, "entries": []}
    if opts.index_sanity_check:
        return _sanity_check(TimeIndex(path, base, writable=False), name, doc, trailers, opts, out,
                             err)
    if _preallocated_only(data):
        return _no_entries_yet(name, len(data) // TIME_ENTRY.size, opts, doc, out)
    log_data = _sibling_log(path, name, err, opts, doc)
    offsets = OffsetIndex(_sibling(path, ".index"), base, writable=False)
    key = str(path.absolute())
    found_errors = False
    previous = -1
    for i in range(len(data) // TIME_ENTRY.size):
        timestamp, relative = TIME_ENTRY.unpack_from(data, i * TIME_ENTRY.size)
        offset = base + relative
        if relative == 0 and i > 0:
            break
        if log_data is not None:
            batch = None
            start = offsets.lookup(offset).position
            try:
                if 0 <= start < len(log_data):
                    batch = next((b for b in iter_batches(log_data, start)
                                  if b.last_offset >= offset), None)
            except CorruptRecordError:
                pass
            if batch is None or batch.last_offset != offset:
                found = -1 if batch is None else batch.last_offset
                trailers.offsets_not_found.setdefault(key, []).append((offset, found))
                found_errors = True
            else:
                try:
                    logged = max((r.timestamp for r in batch.records()), default=-1)
                except CorruptRecordError as error:
                    doc.setdefault("errors", []).append(str(error))
                    logged = -1
                if logged != timestamp:
                    trailers.timestamp_mismatches.setdefault(key, []).append((timestamp, logged))
                    found_errors = True
                if previous >= timestamp:
                    trailers.out_of_order.setdefault(key, []).append((timestamp, previous))
                    found_errors = True
        if not opts.verify_index_only and not opts.json:
            out.write(f"timestamp: {timestamp} offset: {offset}\n")
        doc["entries"].append({"timestamp": timestamp, "offset": offset})
        previous = timestamp
    if found_errors and opts.verify_index_only:
        trailers.damaged_files.append(name)
    doc.update({name_: [list(p) for p in table.get(key, [])] for name_, table in (
        ("timestampMismatches", trailers.timestamp_mismatches),
        ("outOfOrderTimestamps", trailers.out_of_order),
        ("offsetsNotFound", trailers.offsets_not_found))})
    return doc


def parse_producer_snapshot(data: bytes) -> list[SnapshotEntry]:
    """The entries of a ``.snapshot`` file (``storage.producer_state.read_snapshot``, the one
    parser); ``ValueError`` with Kafka's wording when the version, the layout or the CRC is
    wrong."""
    from storage.errors import CorruptRecordError
    from storage.producer_state import read_snapshot

    try:
        return read_snapshot(data)
    except CorruptRecordError as error:
        raise ValueError(error.fields["reason"]) from error


def _dump_snapshot(path: Path, name: str, kind: str, opts: DumpOptions, trailers: Trailers,
                   out: TextIO, err: TextIO) -> dict[str, Any]:
    try:
        entries = parse_producer_snapshot(bytes(read_only(path)))
    except ValueError as error:
        trailers.damaged_files.append(name)
        if not opts.json:
            err.write(f"{error}\n")
        return {"entries": [], "errors": [str(error)]}
    docs = []
    for e in entries:
        txn = e.current_txn_first_offset
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: "
                f"{'OptionalLong.empty' if txn < 0 else f'OptionalLong[{txn}]'} "
                f"lastTimestamp: {e.timestamp} ")
        doc = {"producerId": e.producer_id, "producerEpoch": e.epoch,
               "coordinatorEpoch": e.coordinator_epoch,
               "currentTxnFirstOffset": None if txn < 0 else txn, "lastTimestamp": e.timestamp}
        if e.last_offset >= 0:
            line += (f"firstSequence: {e.first_seq} lastSequence: {e.last_seq} "
                     f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                     f"timestamp: {e.timestamp}")
            doc.update({"firstSequence": e.first_seq, "lastSequence": e.last_seq,
                        "lastOffset": e.last_offset, "offsetDelta": e.offset_delta,
                        "timestamp": e.timestamp})
        if not opts.json:
            out.write(line + "\n")
        docs.append(doc)
    return {"entries": docs}


def parse_txn_index(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(version, producerId, firstOffset, lastOffset, lastStableOffset) per entry, decoded by
    ``storage.txn_index.AbortedTxn``; a torn piece at the end is left out, as readers do."""
    from storage.txn_index import ENTRY as TXN_ENTRY
    from storage.txn_index import AbortedTxn

    txns = (AbortedTxn.decode(data, i)
            for i in range(0, len(data) - TXN_ENTRY.size + 1, TXN_ENTRY.size))
    return [(t.version, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in txns]


def _dump_txn_index(path: Path, name: str, kind: str, opts: DumpOptions, trailers: Trailers,
                    out: TextIO, err: TextIO) -> dict[str, Any]:
    docs = []
    for version, producer, first, last, stable in parse_txn_index(bytes(read_only(path))):
        if not opts.json:
            out.write(f"version: {version} producerId: {producer} firstOffset: {first} "
                      f"lastOffset: {last} lastStableOffset: {stable}\n")
        docs.append({"version": version, "producerId": producer, "firstOffset": first,
                     "lastOffset": last, "lastStableOffset": stable})
    return {"entries": docs}


def read_checkpoint(path: Path) -> list[dict[str, Any]]:
    """The entries of a text checkpoint (``CheckpointError`` when malformed)."""
    from storage.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile

    if path.name == EPOCH_CHECKPOINT:
        return [{"epoch": e.epoch, "startOffset": e.start_offset}
                for e in LeaderEpochCheckpointFile(path).read()]
    return [{"topic": tp.topic, "partition": tp.partition, "offset": offset}
            for tp, offset in OffsetCheckpointFile(path).read().items()]


def _dump_checkpoint(path: Path, name: str, kind: str, opts: DumpOptions, trailers: Trailers,
                     out: TextIO, err: TextIO) -> dict[str, Any]:
    from storage.errors import CheckpointError

    try:
        entries = read_checkpoint(path)
    except CheckpointError as error:
        trailers.damaged_files.append(name)
        if not opts.json:
            err.write(f"{error}\n")
        return {"entries": [], "errors": [str(error)]}
    if not opts.json:
        out.write(f"version: 0 entries: {len(entries)}\n")
        out.writelines(" ".join(f"{k}: {v}" for k, v in e.items()) + "\n" for e in entries)
    return {"version": 0, "entries": entries}
