"""``strata dump-log FILES...``: Kafka's DumpLogSegments, plus ``--json`` and ``--verify``.

Files are opened read-only and never changed (no ``Log.open``, which recovers). The kind of a file
comes from its name, a temporary suffix (``.cleaned``, ``.swap``, ``.deleted``) stripped first:

    .log, .checkpoint (KRaft snapshot)   record batches, one line per batch; records too with
                                         --deep-iteration or --print-data-log
    .index / .timeindex                  entries, with Kafka's cross-check against the .log beside
    .snapshot                            producer state (kafka-storage.md §2)
    .txnindex                            aborted transactions
    *-offset-checkpoint, leader-epoch-checkpoint    the text checkpoints

Text output is Kafka's, field for field (core/.../tools/DumpLogSegments.scala at the commit of
reference/kafka-storage.md)::

    Dumping 00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1
      producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
      deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1000 size: 70 magic: 2
      compresscodec: none crc: 1902797193 isvalid: true                       (one line)
    | offset: 0 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: -1 headerKeys: []
      key: k payload: v                                                      (one line)

Index mismatches, time-index errors and non-consecutive offsets go to stderr after the last file,
as Kafka prints them (newest first where Kafka prepends). ``--json`` prints one JSON document per
file instead (see ``_batch_json``/``_record_json`` for the fields, named as in the text).

``--offsets-decoder`` and ``--transaction-log-decoder`` print the records of ``__consumer_offsets``
and ``__transaction_state`` as Kafka's options of those names do (``group_records``,
``transaction_records``); with ``--json`` a record carries the decoded ``key`` and ``payload`` as
objects (payload null for a tombstone), or ``decodeError`` with the line the text would print.

``--verify`` checks instead of dumping: every batch's CRC and offsets (the rules by which
``LogSegment.recover`` would truncate), every offset-index entry (a batch boundary, no earlier
batch reaching its offset), every time-index entry (timestamps increasing, the batch holding its
offset has a max timestamp at or above it), snapshot CRCs and checkpoint syntax. Each problem is
printed as ``<file>: position <byte>: <what>``. ``recover`` runs the same checks (``check_log``,
``check_offset_index``, ``check_time_index``).

Exit codes: 0 clean; 1 when --verify, --index-sanity-check or --verify-index-only finds damage
or a snapshot/checkpoint cannot be parsed (a plain dump shows ``isvalid: false`` and exits 0, as
Kafka does); 2 for usage errors (a missing file).
"""

from __future__ import annotations

import argparse
import base64
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, TextIO, cast

from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError
from ops.tools.output import EscapingStream, json_line, printable

if TYPE_CHECKING:
    import numpy as np

    from storage.index import OffsetIndex, TimeIndex
    from storage.producer_state import SnapshotEntry
    from storage.records import Record, RecordBatch

INT32_MAX = 2**31 - 1
KAFKA_MAX_MESSAGE_SIZE = 5 * 1024 * 1024       # Kafka's --max-message-size default (index check)
MAX_PROBLEMS_PER_FILE = 20
DECODERS = ("string", "hex", "msgpack", "none")
TOPIC_DECODERS = {"offsets": "ops.tools.group_records",
                  "transaction-log": "ops.tools.transaction_records"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
OFFSET_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "cleaner-offset-checkpoint", "replication-offset-checkpoint")
EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
KINDS = {".log": "log", ".checkpoint": "kraft-snapshot", ".index": "offset-index",
         ".timeindex": "time-index", ".snapshot": "producer-snapshot", ".txnindex": "txn-index"}

# the layouts are storage's, one definition per format (index entries are read where needed:
# storage.index imports numpy, which the CLI does not load to start)
from storage.txn_index import ENTRY as TXN_ENTRY  # noqa: E402


# ---- the subcommand ----------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump-log", help="print or verify segment, index, snapshot and checkpoint files",
        description="Kafka's DumpLogSegments: print the batches and records of .log files, the "
                    "entries of .index/.timeindex/.snapshot/.txnindex files and text checkpoints; "
                    "with --verify check them instead. Files are only read.")
    parser.add_argument("files", nargs="*", metavar="FILE", help="files to dump")
    parser.add_argument("--files", dest="files_option", action="append", default=[],
                        metavar="FILE,...", help="comma-separated files (Kafka's option)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print keys and values (implies --deep-iteration)")
    parser.add_argument("--deep-iteration", action="store_true", help="print every record")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="print only keys and values of records")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only run the broker's startup sanity check of index files")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="only report index entries that do not match the log")
    parser.add_argument("--max-bytes", type=_positive_int, default=None, metavar="N",
                        help="read at most N bytes of each .log file")
    parser.add_argument("--key-decoder", choices=DECODERS, default=None,
                        help="how keys print (default string; implies --print-data-log)")
    parser.add_argument("--value-decoder", choices=DECODERS, default=None,
                        help="how values print (default string; implies --print-data-log)")
    parser.add_argument("--offsets-decoder", action="store_true",
                        help="print records as __consumer_offsets offset commits and group "
                             "metadata (implies --print-data-log)")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="print records as __transaction_state transaction metadata "
                             "(implies --print-data-log)")
    parser.add_argument("--json", action="store_true", help="one JSON document per file")
    parser.add_argument("--verify", action="store_true",
                        help="check CRCs, offsets, index and time index entries, snapshots and "
                             "checkpoints; exit 1 on any damage")
    parser.set_defaults(handler=run)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of bytes")
    return value


@dataclass(frozen=True, slots=True)
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    skip_record_metadata: bool = False
    index_sanity_check: bool = False
    verify_index_only: bool = False
    max_bytes: int | None = None
    key_decoder: str = "string"
    value_decoder: str = "string"
    json: bool = False
    verify: bool = False
    topic_decoder: str | None = None       # a key of TOPIC_DECODERS

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DumpOptions:
        topic = ("offsets" if args.offsets_decoder else             # Kafka's precedence
                 "transaction-log" if args.transaction_log_decoder else None)
        decoders_given = (args.key_decoder is not None or args.value_decoder is not None
                          or topic is not None)
        print_data = args.print_data_log or decoders_given       # as Kafka's decoder classes do
        return cls(print_data, args.deep_iteration or print_data, args.skip_record_metadata,
                   args.index_sanity_check, args.verify_index_only, args.max_bytes,
                   args.key_decoder or "string", args.value_decoder or "string", args.json,
                   args.verify, topic)


@dataclass
class Trailers:
    """What Kafka prints to stderr after the last file, and whether anything was damaged."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    timestamp_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    damaged_files: list[str] = field(default_factory=list)

    def write(self, err: TextIO) -> None:
        for name, pairs in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            err.writelines(f"  Index offset: {a}, log offset: {b}\n" for a, b in pairs)
        for name, pairs in self.timestamp_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            err.writelines(f"  Index timestamp: {a}, log timestamp: {b}\n" for a, b in pairs)
        for name, pairs in self.out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            err.writelines(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n"
                           for a, b in pairs)
        for pairs in self.offsets_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            err.writelines(f"Indexed offset: {a}, found log offset: {b}\n" for a, b in pairs)
        for name, pairs in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            err.writelines(f"  {a} is followed by {b}\n" for a, b in pairs)


def run(args: argparse.Namespace) -> int:
    opts = DumpOptions.from_args(args)
    names = [*args.files, *(n for group in args.files_option for n in group.split(",") if n)]
    if not names:
        raise UsageError("no files given")
    missing = [printable(n) for n in names if not Path(n).is_file()]
    if missing:
        raise UsageError(f"not a file: {', '.join(missing)}")
    out, err = sys.stdout, sys.stderr
    for stream in (out, err):
        try:
            stream.reconfigure(errors="replace")        # type: ignore[attr-defined]
        except (AttributeError, ValueError):
            pass
    trailers = Trailers()
    for name in names:
        path = Path(name)
        # every line naming the file shows control characters of its name escaped
        raw = [name, str(path), str(path.absolute()), path.name]
        file_out, file_err = EscapingStream(out, raw), EscapingStream(err, raw)
        if opts.verify:
            verify_file(path, printable(name), opts, trailers, file_out)
        else:
            dump_file(path, printable(name), opts, trailers, file_out, file_err)
    if not opts.json:
        trailers.write(err)
    if trailers.damaged_files and opts.verify and not opts.json:
        err.write(f"dump-log: damage found in {len(trailers.damaged_files)} of {len(names)} "
                  f"files: {', '.join(trailers.damaged_files)}\n")
    return EXIT_PROBLEMS if trailers.damaged_files else EXIT_OK


def file_kind(path: Path) -> str:
    """What a file holds, from its name (a temporary suffix is looked through)."""
    from storage import files

    name = files.strip_temp_suffix(path).name
    if name in OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if name == EPOCH_CHECKPOINT:
        return "epoch-checkpoint"
    return KINDS.get(name[name.rfind("."):] if "." in name else "", "unknown")


def _segment_base(path: Path) -> int | None:
    from storage import files

    return files.offset_from_file_name(path.name) if files.is_segment_file(path.name) else None


def _sibling(path: Path, suffix: str) -> Path:
    """The file of the same segment with ``suffix`` (``.log`` beside an index)."""
    return path.with_name(path.name.split(".", 1)[0] + suffix)


def read_only(path: Path) -> memoryview:
    """The file's bytes through a read-only map (empty for an empty file); never written."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    finally:
        os.close(fd)


# ---- dumping -----------------------------------------------------------------------------------
def dump_file(path: Path, name: str, opts: DumpOptions, trailers: Trailers, out: TextIO,
              err: TextIO) -> None:
    kind = file_kind(path)
    if not opts.json:
        out.write(f"Dumping {name}\n")
    if kind == "unknown":
        if opts.json:
            out.write(json_line({"file": name, "type": kind, "errors": ["unknown file type"]})
                      + "\n")
        else:
            err.write(f"Ignoring unknown file {name}\n")
        return
    dumpers: dict[str, Callable[..., dict[str, Any]]] = {
        "log": _dump_log, "kraft-snapshot": _dump_log, "offset-index": _dump_index,
        "time-index": _dump_time_index, "producer-snapshot": _dump_snapshot,
        "txn-index": _dump_txn_index, "offset-checkpoint": _dump_checkpoint,
        "epoch-checkpoint": _dump_checkpoint}
    doc = dumpers[kind](path, name, kind, opts, trailers, out, err)
    if opts.json:
        out.write(json_line({"file": name, "type": kind, **doc}) + "\n")


def _dump_log(path: Path, name: str, kind: str, opts: DumpOptions, trailers: Trailers,
              out: TextIO, err: TextIO) -> dict[str, Any]:
    from storage.errors import CorruptRecordError
    from storage.records import iter_batches

    doc: dict[str, Any] = {}
    header = _log_header(path, kind)
    if header is not None:
        doc.update(header[1])
        if not opts.json:
            out.write(header[0] + "\n")
    data = read_only(path)
    view = data if opts.max_bytes is None else data[:opts.max_bytes]
    walk = _RecordWalk(name, opts, out, err)
    batches: list[dict[str, Any]] = []
    valid = 0
    try:
        for batch in iter_batches(view, path=path):
            stored, computed = batch.stored_crc(), batch.compute_crc()
            if opts.json:
                batches.append(_batch_json(batch, valid, stored, computed))
            else:
                out.write(_batch_line(batch, valid, stored, stored == computed) + "\n")
            if opts.deep_iteration:
                records = walk.batch(batch, valid)
                if opts.json:
                    batches[-1]["records"] = records
            valid += batch.size
    except CorruptRecordError as error:
        walk.errors.append(str(error))               # it names the file and the position
        if not opts.json:
            err.write(f"{error}\n")
    trailing = len(view) - valid
    if trailing > 0 and opts.max_bytes is None and not opts.json:
        out.write(f"Found {trailing} invalid bytes at the end of {path.name}\n")
    if walk.gaps:
        trailers.non_consecutive[printable(str(path.absolute()))] = walk.gaps[::-1]   # newest 1st
    doc.update({"size": len(data), "batches": batches, "validBytes": valid,
                "invalidBytes": trailing if opts.max_bytes is None else None,
                "nonConsecutiveOffsets": [list(gap) for gap in walk.gaps],
                "errors": walk.errors})
    return doc


class _RecordWalk:
    """Prints (or collects as JSON) the records of one file's batches, and notes offset gaps."""

    def __init__(self, name: str, opts: DumpOptions, out: TextIO, err: TextIO) -> None:
        self.name, self.opts, self.out, self.err = name, opts, out, err
        self.keys, self.values = decoder(opts.key_decoder), decoder(opts.value_decoder)
        self.topic = topic_decoder(opts.topic_decoder)
        self.last_offset = -1
        self.gaps: list[tuple[int, int]] = []
        self.errors: list[str] = []

    def batch(self, batch: RecordBatch, position: int) -> list[dict[str, Any]]:
        from storage.errors import CorruptRecordError

        try:
            records = batch.records(check_crc=False)   # a CRC mismatch is reported on its own
        except CorruptRecordError as error:
            problem = f"cannot read the records of the batch at position {position}: {error}"
            self.errors.append(problem)
            if not self.opts.json:
                self.err.write(f"{self.name}: {problem}\n")
            return []
        legacy_crcs = _legacy_crcs(batch) if batch.magic < 2 and records else []
        docs = []
        for i, record in enumerate(records):
            if self.last_offset != -1 and record.offset != self.last_offset + 1:
                self.gaps.append((self.last_offset, record.offset))
            self.last_offset = record.offset
            if self.opts.json:
                docs.append(_record_json(batch, record, self.opts, self.keys, self.values,
                                         self.topic))
            else:
                crc = legacy_crcs[i] if i < len(legacy_crcs) else None
                self.out.write(_record_line(batch, record, self.opts, self.keys, self.values,
                                            crc, self.topic) + "\n")
        return docs


def _log_header(path: Path, kind: str) -> tuple[str, dict[str, Any]] | None:
    if kind == "log":
        base = _segment_base(path)
        return None if base is None else (f"Log starting offset: {base}",
                                          {"logStartingOffset": base})
    if path.name == BOOTSTRAP_SNAPSHOT:
        return "KRaft bootstrap snapshot", {"snapshot": "bootstrap"}
    offset, _, epoch = path.name.split(".", 1)[0].partition("-")
    if offset.isdigit() and epoch.isdigit():
        return (f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}",
                {"snapshotEndOffset": int(offset), "snapshotEpoch": int(epoch)})
    return None


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _timestamp_type(batch: RecordBatch) -> str:
    if batch.magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if int(batch.timestamp_type) == 1 else "CreateTime"


def _batch_line(batch: RecordBatch, position: int, crc: int, valid: bool) -> str:
    if batch.magic >= 2:
        h = batch.header
        horizon = ("OptionalLong.empty" if h.delete_horizon_ms is None
                   else f"OptionalLong[{h.delete_horizon_ms}]")
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: "
                f"{h.records_count} baseSequence: {h.base_sequence} lastSequence: "
                f"{h.last_sequence} producerId: {h.producer_id} producerEpoch: "
                f"{h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_bool(h.is_transactional)} isControl: "
                f"{_bool(h.is_control)} deleteHorizonMs: {horizon}")
    else:
        head = f"offset: {batch.last_offset}"
    return (f"{head} position: {position} {_timestamp_type(batch)}: {batch.max_timestamp} "
            f"size: {batch.size} magic: {batch.magic} compresscodec: "
            f"{batch.compression.name.lower()} crc: {crc} isvalid: {_bool(valid)}")


def _batch_json(batch: RecordBatch, position: int, crc: int, computed: int) -> dict[str, Any]:
    h = batch.header
    return {"baseOffset": h.base_offset, "lastOffset": batch.last_offset,
            "count": h.records_count, "baseSequence": h.base_sequence,
            "lastSequence": h.last_sequence, "producerId": h.producer_id,
            "producerEpoch": h.producer_epoch, "partitionLeaderEpoch": h.partition_leader_epoch,
            "isTransactional": batch.is_transactional, "isControl": batch.is_control,
            "deleteHorizonMs": batch.delete_horizon_ms, "position": position,
            "timestampType": _timestamp_type(batch), "baseTimestamp": h.base_timestamp,
            "maxTimestamp": batch.max_timestamp, "size": batch.size, "magic": batch.magic,
            "compressCodec": batch.compression.name.lower(), "attributes": h.attributes,
            "crc": crc, "computedCrc": computed, "isValid": crc == computed}


def _sequence(batch: RecordBatch, record: Record) -> int:
    """Kafka's DefaultRecord.sequence: the base sequence plus the offset delta, wrapping."""
    base = batch.base_sequence
    if base < 0:
        return -1
    delta = record.offset - batch.base_offset
    return delta - (INT32_MAX - base) - 1 if base > INT32_MAX - delta else base + delta


def _header_key(key: str) -> str:
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _record_line(batch: RecordBatch, record: Record, opts: DumpOptions, key_decoder: Decoder,
                 value_decoder: Decoder, legacy_crc: tuple[bool, int] | None,
                 topic: TopicDecoder | None = None) -> str:
    line, prefix = "", "| "
    if not opts.skip_record_metadata:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        line = (f"| offset: {record.offset} {_timestamp_type(batch)}: {record.timestamp} "
                f"keySize: {key_size} valueSize: {value_size}")
        prefix = " "
        if batch.magic >= 2:
            keys = ",".join(_header_key(k) for k, _ in record.headers)
            line += f" sequence: {_sequence(batch, record)} headerKeys: [{keys}]"
        if legacy_crc is not None:
            line += f" isValid: {_bool(legacy_crc[0])} crc: {legacy_crc[1]}}}"  # Kafka's stray }
        if batch.is_control:
            line += control_text(record)
    if opts.print_data_log and not batch.is_control:
        if topic is not None:
            key, payload = topic.format_record(record.key, record.value, record.offset)
        else:
            key = None if record.key is None else key_decoder(record.key)
            payload = None if record.value is None else value_decoder(record.value)
        if key is not None:
            line += f"{prefix}key: {_as_text(key)}"
            prefix = " "
        if payload is not None:
            line += f" payload: {_as_text(payload)}"
    return line


def _record_json(batch: RecordBatch, record: Record, opts: DumpOptions, key_decoder: Decoder,
                 value_decoder: Decoder, topic: TopicDecoder | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"offset": record.offset}
    if not opts.skip_record_metadata:
        doc.update({"timestamp": record.timestamp,
                    "keySize": -1 if record.key is None else len(record.key),
                    "valueSize": -1 if record.value is None else len(record.value),
                    "sequence": _sequence(batch, record) if batch.magic >= 2 else None,
                    "headerKeys": [_header_key(k) for k, _ in record.headers]})
        if batch.is_control:
            doc["control"] = control_json(record)
    if opts.print_data_log and not batch.is_control and topic is not None:
        doc.update(topic.record_json(record.key, record.value, record.offset))
    elif opts.print_data_log and not batch.is_control:
        if record.key is not None and (key := key_decoder(record.key)) is not None:
            doc["key"] = key
        if record.value is not None and (payload := value_decoder(record.value)) is not None:
            doc["payload"] = payload
        doc["headers"] = [{"key": _header_key(k),
                           "value": None if v is None else value_decoder(v)}
                          for k, v in record.headers]
    return doc


def _legacy_crcs(batch: RecordBatch) -> list[tuple[bool, int]]:
    """(valid, stored crc) of each record of a magic 0/1 entry: the entry itself, or the inner
    messages of a compressed wrapper (Kafka prints them per record)."""
    from storage import compression, legacy
    from storage.errors import CorruptRecordError
    from storage.records import MAX_DECOMPRESSED_BYTES

    message = legacy.read_message(batch.buffer, 0)
    if message.codec == 0:
        return [(batch.is_valid(), message.crc)]
    try:
        data = memoryview(compression.decompress(
            message.codec, message.value, max_size=MAX_DECOMPRESSED_BYTES,
            legacy_lz4_checksum=message.magic == 0))
        checks, pos = [], 0
        while pos < len(data):
            inner = legacy.read_message(data, pos)
            checks.append((legacy.compute_crc(data, pos, inner.size) == inner.crc, inner.crc))
            pos += inner.size
        return checks
    except (CorruptRecordError, TypeError, ValueError):
        return []


# ---- decoders ----------------------------------------------------------------------------------
Decoder = Callable[[bytes], Any]


class TopicDecoder(Protocol):
    """How the records of an internal topic print: a module such as ``group_records``."""

    def format_record(self, key: bytes | None, value: bytes | None,
                      offset: int) -> tuple[str | None, str | None]: ...

    def record_json(self, key: bytes | None, value: bytes | None,
                    offset: int) -> dict[str, Any]: ...


def topic_decoder(name: str | None) -> TopicDecoder | None:
    """The decoder module of a ``TOPIC_DECODERS`` name, imported on first use."""
    if name is None:
        return None
    import importlib

    return cast("TopicDecoder", importlib.import_module(TOPIC_DECODERS[name]))


def decoder(name: str) -> Decoder:
    """Bytes -> what prints: ``string`` UTF-8 with replacement characters (Kafka's
    StringDecoder), ``hex``, ``msgpack`` (the unpacked value, bytes inside it as hex), ``none``
    (nothing: the key or value is left out)."""
    if name == "string":
        return lambda raw: bytes(raw).decode("utf-8", "replace")
    if name == "hex":
        return lambda raw: bytes(raw).hex()
    if name == "msgpack":
        return _msgpack
    return lambda raw: None


def _msgpack(raw: bytes) -> Any:
    import msgpack

    try:
        return _plain(msgpack.unpackb(bytes(raw), raw=False, strict_map_key=False))
    except Exception as error:  # noqa: BLE001 - any undecodable value prints as such
        return f"<not msgpack: {type(error).__name__}: {error}>"


def _plain(value: Any) -> Any:
    """A msgpack value as JSON-able data: bytes as hex, map keys as strings."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {k if isinstance(k, str) else json_line(_plain(k)): _plain(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json_line(value)


# ---- control records ---------------------------------------------------------------------------
def control_json(record: Record) -> dict[str, Any]:
    """The control record as Kafka's DumpLogSegments decodes it: a transaction marker, a KRaft
    snapshot header/footer, kraft.version or voters record, or just its type."""
    from storage.errors import CorruptRecordError
    from storage.records import parse_control_record     # the one parser of the key and marker

    try:
        type_id, epoch = parse_control_record(record)
        type_id = int(type_id)
        name = CONTROL_TYPES.get(type_id, "UNKNOWN")
        if type_id in (0, 1):
            return {"type": name, "typeId": type_id, "coordinatorEpoch": epoch}
        if type_id in _KRAFT_DECODERS:
            value = bytes(record.value or b"")
            return {"type": name, "typeId": type_id, "data": _KRAFT_DECODERS[type_id](value)}
        return {"type": name, "typeId": type_id}
    except CorruptRecordError as error:
        return {"type": "INVALID", "error": error.message}
    except (ValueError, struct.error, IndexError, UnicodeDecodeError) as error:
        return {"type": "INVALID", "error": str(error)}


def control_text(record: Record) -> str:
    info = control_json(record)
    name = info["type"]
    if name == "INVALID":
        return f" controlType: INVALID ({info['error']})"
    if name in ("ABORT", "COMMIT"):
        return f" endTxnMarker: {name} coordinatorEpoch: {info['coordinatorEpoch']}"
    if "data" in info:
        return f" {_KRAFT_LABELS[info['typeId']]} {json_line(info['data'])}"
    return f" controlType: {name}({info['typeId']})"


class _Reader:
    """Kafka's flexible-version message encoding (KIP-482), enough for the KRaft control records."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("unsigned varint longer than 5 bytes")

    def string(self) -> str:
        length = self.uvarint() - 1
        if length < 0:
            raise ValueError("null string")
        text = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return text

    def uuid(self) -> str:
        raw = self.data[self.pos:self.pos + 16]
        self.pos += 16
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def array(self, item: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
        return [item() for _ in range(self.uvarint() - 1)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _struct(reader: _Reader, **fields: Callable[[], Any]) -> dict[str, Any]:
    doc = {name: read() for name, read in fields.items()}
    reader.tagged_fields()
    return doc


def _snapshot_header(value: bytes) -> dict[str, Any]:
    r = _Reader(value)
    return _struct(r, version=lambda: r.fixed(">h"),
                   lastContainedLogTimestamp=lambda: r.fixed(">q"))


def _snapshot_footer(value: bytes) -> dict[str, Any]:
    r = _Reader(value)
    return _struct(r, version=lambda: r.fixed(">h"))


def _kraft_version(value: bytes) -> dict[str, Any]:
    r = _Reader(value)
    return _struct(r, version=lambda: r.fixed(">h"), kRaftVersion=lambda: r.fixed(">h"))


def _voters(value: bytes) -> dict[str, Any]:
    r = _Reader(value)

    def endpoint() -> dict[str, Any]:
        return _struct(r, name=r.string, host=r.string, port=lambda: r.fixed(">H"))

    def feature() -> dict[str, Any]:
        return _struct(r, minSupportedVersion=lambda: r.fixed(">h"),
                       maxSupportedVersion=lambda: r.fixed(">h"))

    def voter() -> dict[str, Any]:
        return _struct(r, voterId=lambda: r.fixed(">i"), voterDirectoryId=r.uuid,
                       endpoints=lambda: r.array(endpoint), kRaftVersionFeature=feature)

    return _struct(r, version=lambda: r.fixed(">h"), voters=lambda: r.array(voter))


_KRAFT_DECODERS: dict[int, Callable[[bytes], dict[str, Any]]] = {
    3: _snapshot_header, 4: _snapshot_footer, 5: _kraft_version, 6: _voters}
_KRAFT_LABELS = {3: "SnapshotHeader", 4: "SnapshotFooter", 5: "KRaftVersion", 6: "KRaftVoters"}


# ---- indexes, snapshots, checkpoints (dump) ----------------------------------------------------
def _index_base(path: Path) -> int:
    base = _segment_base(path)
    if base is None:
        raise UsageError(f"{path}: an index file name must start with its 20-digit base offset")
    return base


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


# ---- checks (--verify and recover) -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Problem:
    """One piece of damage: the file, the byte position in that file, and what is wrong."""

    path: str
    position: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}: position {self.position}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "position": self.position, "message": self.message}


@dataclass(frozen=True, eq=False)
class LogCheck:
    """A segment file re-validated by the rules of ``LogSegment.recover``: every batch's CRC, base
    offsets above the previous batch's last offset (and the segment's base offset).
    ``valid_bytes`` is where recovery truncates (``problem`` says why); the arrays describe the
    batches before it. ``dropped_*`` count the batches after it whose headers still read (their
    records are lost by the truncation). ``overflow`` names the first valid batch whose last
    offset is more than 2^31 - 1 above the segment's base: recovery splits the segment there
    (``storage.split``) and loses nothing."""

    path: str
    size: int
    valid_bytes: int
    problem: Problem | None
    positions: np.ndarray
    base_offsets: np.ndarray
    last_offsets: np.ndarray
    max_timestamps: np.ndarray
    records: int
    dropped_batches: int
    dropped_records: int
    overflow: Problem | None = None

    @property
    def truncated_bytes(self) -> int:
        return self.size - self.valid_bytes

    @property
    def batches(self) -> int:
        return len(self.positions)

    @property
    def last_offset(self) -> int | None:
        return int(self.last_offsets[-1]) if len(self.last_offsets) else None

    def summary(self) -> str:
        span = "" if self.last_offset is None else \
            f", offsets {int(self.base_offsets[0])}..{self.last_offset}"
        return f"{self.batches} batches, {self.records} records{span}, {self.valid_bytes} bytes"


def check_log(path: Path | str, data: bytes | memoryview, base_offset: int | None, *,
              max_message_bytes: int | None = None, name: str | None = None) -> LogCheck:
    """Re-validate the batches of ``data`` (the bytes of segment ``path``). With
    ``max_message_bytes``, a batch over it and over the recovery read chunk also stops the
    check, as it stops ``LogSegment.recover``."""
    import numpy as np

    from storage.records import scan_batches
    from storage.segment import RECOVERY_CHUNK_BYTES

    label = name or str(path)
    size = len(data)
    scan = scan_batches(data, check_crc=True)
    base, last, sizes = scan.base_offsets, scan.last_offsets, scan.sizes
    floor = np.iinfo(np.int64).min if base_offset is None else base_offset - 1
    previous = np.concatenate(([floor], last[:-1])) if len(last) else last
    bad = (base <= previous) | (last < base)
    if max_message_bytes is not None:
        bad |= sizes > max(max_message_bytes, RECOVERY_CHUNK_BYTES)
    kept = int(np.argmax(bad)) if bad.any() else len(base)
    valid = int(scan.positions[kept - 1] + sizes[kept - 1]) if kept else 0
    problem = None
    if kept < len(base):
        b, lo = int(base[kept]), int(last[kept])
        if lo < b:
            why = f"its last offset {lo} is below its base offset {b}"
        elif b <= int(previous[kept]):
            why = (f"its base offset {b} is not above "
                   + ("the previous batch's last offset" if kept else "the segment's base "
                      "offset - 1") + f" {int(previous[kept])}")
        else:
            why = f"its {int(sizes[kept])} bytes exceed max.message.bytes={max_message_bytes}"
        problem = Problem(label, valid, f"batch at offsets {b}..{lo} is out of order: {why}")
    elif scan.error is not None and scan.error.startswith("CRC"):
        problem = Problem(label, valid, _crc_problem(data, valid))
    elif scan.error is not None:
        problem = Problem(label, valid, scan.error.split(" at position ")[0])
    elif valid < size:
        problem = Problem(label, valid, f"{size - valid} bytes at the end are not a complete "
                                        f"batch (a torn write)")
    dropped_batches = dropped_records = 0
    if valid < size:
        rest = scan_batches(data, start=valid)
        dropped_batches = len(rest)
        dropped_records = int(np.clip(rest.records_counts, 0, None).sum())
    overflow = None
    if base_offset is not None:
        beyond = np.flatnonzero(last[:kept] - base_offset > INT32_MAX)
        if len(beyond):
            at = int(beyond[0])
            overflow = Problem(label, int(scan.positions[at]), (
                f"batch at offsets {int(base[at])}..{int(last[at])} overflows the segment base "
                f"{base_offset} by more than 2^31 - 1 (an old broker's segment): recovery splits "
                f"the segment there"))
    counts = scan.records_counts[:kept]
    return LogCheck(label, size, valid, problem, scan.positions[:kept], base[:kept],
                    last[:kept], scan.max_timestamps[:kept],
                    int(np.clip(counts, 0, None).sum()), dropped_batches, dropped_records,
                    overflow)


def _crc_problem(data: bytes | memoryview, position: int) -> str:
    from storage.records import RecordBatch

    batch = RecordBatch(data[position:], position)     # complete: the scan read all of it
    first = batch.header.base_offset if batch.magic >= 2 else batch.last_offset
    return (f"batch at offsets {first}..{batch.last_offset} fails its CRC (stored crc "
            f"{batch.stored_crc()}, computed crc {batch.compute_crc()})")


def _zero_tail(keys: np.ndarray, values: np.ndarray) -> int:
    """Entries before the zeroed, preallocated tail of an index never trimmed (after a crash,
    or the active segment's): Kafka stops at the first entry after the first whose relative
    offset is 0. Returns the entry count when the rest is not all zero."""
    import numpy as np

    zero = (keys == 0) & (values == 0)
    zero[:1] = False
    first = int(np.argmax(zero)) if zero.any() else len(keys)
    return first if zero[first:].all() else len(keys)


def _entries(label: str, data: bytes | memoryview, dtype: Any, key: str,
             value: str) -> tuple[np.ndarray, np.ndarray, list[Problem], list[str]]:
    """The two columns of an index file up to its zeroed tail, and the problems and warnings
    of its length and that tail."""
    import numpy as np

    width = np.dtype(dtype).itemsize
    count = len(data) // width
    problems, warnings = [], []
    if len(data) % width:
        problems.append(Problem(label, count * width, f"{len(data) % width} bytes at the end "
                                                      f"are not a whole {width}-byte entry"))
    table = np.frombuffer(data, dtype=dtype, count=count)
    keys, values = table[key].astype(np.int64), table[value].astype(np.int64)
    used = _zero_tail(keys, values)
    if used < count:
        warnings.append(f"{count - used} zeroed entries after entry {used - 1}: preallocated and "
                        f"not trimmed (an active segment, or an unclean shutdown)")
    return keys[:used], values[:used], problems, warnings


def _previous(column: np.ndarray, first: int) -> np.ndarray:
    import numpy as np

    return np.concatenate(([first], column[:-1])) if len(column) else column


def check_offset_index(path: Path | str, data: bytes | memoryview, base_offset: int,
                       log: LogCheck) -> tuple[list[Problem], list[str]]:
    """Problems and warnings of an offset index checked against its segment: whole 8-byte
    entries, offsets increasing, positions not decreasing, every position a batch boundary of the
    valid part of the log, no batch before it reaching the entry's offset, the offset within
    the log. (One append of several batches gets one entry: its last offset at the position of
    its first batch, so the offset may sit in a later batch than the one at the position.)"""
    import numpy as np

    label = str(path)
    from storage.index import OFFSET_ENTRY_DTYPE as dtype

    relative, positions, problems, warnings = _entries(label, data, dtype, "relative_offset",
                                                       "position")
    offsets = base_offset + relative
    starts, lasts = log.positions, log.last_offsets
    k = np.searchsorted(starts, positions)
    inside = np.minimum(k, max(len(starts) - 1, 0))
    boundary = (k < len(starts)) & (starts[inside] == positions) if len(starts) else k < 0
    before = np.where(k > 0, lasts[np.maximum(k - 1, 0)], -1) if len(lasts) else offsets * 0 - 1
    last_offset = log.last_offset
    checks = [
        (relative < 0, lambda i: "the offset is below the base offset"),
        (offsets > (last_offset if last_offset is not None else np.iinfo(np.int64).max),
         lambda i: f"the offset is beyond the last offset {last_offset} of the log"),
        (relative <= _previous(relative, -1),
         lambda i: f"the offset is not above the previous entry's {offsets[i - 1]}"),
        (positions < _previous(positions, np.iinfo(np.int64).min),
         lambda i: f"the position is below the previous entry's {positions[i - 1]}"),
        ((positions < 0) | (positions >= log.valid_bytes),
         lambda i: f"the position is outside the valid batches of the log (0..{log.valid_bytes})"),
        (~boundary,
         lambda i: f"the position is inside the batch at position {starts[k[i] - 1]} (offsets "
                   f"{log.base_offsets[k[i] - 1]}..{lasts[k[i] - 1]}), not at a batch boundary"),
        (before >= offsets,
         lambda i: f"the batch before the position already reaches offset {before[i]}: a lookup "
                   f"would skip records"),
    ]
    problems += _first_failures(checks, lambda i, why: Problem(
        label, i * dtype.itemsize, f"entry {i}: offset {offsets[i]} -> position "
                                   f"{positions[i]}: {why}"))
    return problems, warnings


def check_time_index(path: Path | str, data: bytes | memoryview, base_offset: int,
                     log: LogCheck) -> tuple[list[Problem], list[str]]:
    """Problems and warnings of a time index checked against its segment: whole 12-byte
    entries, timestamps increasing, offsets not decreasing, each offset held by a valid batch
    whose max timestamp is at or above the entry's timestamp."""
    import numpy as np

    label = str(path)
    from storage.index import TIME_ENTRY_DTYPE as dtype

    timestamps, relative, problems, warnings = _entries(label, data, dtype, "timestamp",
                                                        "relative_offset")
    offsets = base_offset + relative
    k = np.searchsorted(log.last_offsets, offsets)
    at = np.minimum(k, max(len(log.last_offsets) - 1, 0))
    held = ((k < len(log.last_offsets)) & (log.base_offsets[at] <= offsets)
            if len(log.last_offsets) else k < 0)
    below = held & (log.max_timestamps[at] < timestamps) if len(log.last_offsets) else held
    checks = [
        (relative < 0, lambda i: "the offset is below the base offset"),
        (timestamps <= _previous(timestamps, np.iinfo(np.int64).min),
         lambda i: f"the timestamp is not above the previous entry's {timestamps[i - 1]}"),
        (relative < _previous(relative, -1),
         lambda i: f"the offset is below the previous entry's {offsets[i - 1]}"),
        (~held, lambda i: "no valid batch of the log holds the offset"),
        (below, lambda i: f"the batch holding the offset (position {log.positions[at[i]]}) has "
                          f"max timestamp {log.max_timestamps[at[i]]}, below the entry"),
    ]
    problems += _first_failures(checks, lambda i, why: Problem(
        label, i * dtype.itemsize, f"entry {i}: timestamp {timestamps[i]} -> offset "
                                   f"{offsets[i]}: {why}"))
    return problems, warnings


def _first_failures(checks: list[tuple[np.ndarray, Callable[[int], str]]],
                    problem: Callable[[int, str], Problem]) -> list[Problem]:
    """One problem per failing entry, saying why by the first check it fails (checks are
    vectorised; messages are built only for the first MAX_PROBLEMS_PER_FILE failures)."""
    import numpy as np

    if not checks or not len(checks[0][0]):
        return []
    failed = np.zeros(len(checks[0][0]), dtype=bool)
    for mask, _ in checks:
        failed |= mask
    entries = np.flatnonzero(failed)
    found = []
    for i in entries[:MAX_PROBLEMS_PER_FILE].tolist():
        why = next(explain(i) for mask, explain in checks if mask[i])
        found.append(problem(i, why))
    if len(entries) > MAX_PROBLEMS_PER_FILE:
        first = int(entries[MAX_PROBLEMS_PER_FILE])
        found.append(problem(first, f"... and {len(entries) - MAX_PROBLEMS_PER_FILE} more "
                                    "entries with problems from here on"))
    return found


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS_PER_FILE:
        return problems
    rest = len(problems) - MAX_PROBLEMS_PER_FILE
    last = problems[MAX_PROBLEMS_PER_FILE]
    return [*problems[:MAX_PROBLEMS_PER_FILE],
            Problem(last.path, last.position, f"... and {rest} more problems from here on")]


# ---- verifying ---------------------------------------------------------------------------------
def verify_file(path: Path, name: str, opts: DumpOptions, trailers: Trailers,
                out: TextIO) -> None:
    kind = file_kind(path)
    problems: list[Problem] = []
    warnings: list[str] = []
    doc: dict[str, Any] = {}
    if kind in ("log", "kraft-snapshot"):
        base = _segment_base(path) if kind == "log" else None
        check = check_log(path, read_only(path), base, name=name)
        problems += [p for p in (check.overflow, check.problem) if p is not None]
        if opts.deep_iteration:
            problems += _deep_problems(path, name, check)
        doc = _log_check_json(check)
        summary = check.summary()
    elif kind in ("offset-index", "time-index"):
        base = _index_base(path)
        log_path = _sibling(path, ".log")
        data = read_only(path)
        if not log_path.is_file():
            problems.append(Problem(name, 0, f"no {log_path.name} beside it (the loader "
                                              f"deletes an index without a log)"))
        else:
            check = check_log(log_path, read_only(log_path), base)
            checker = check_offset_index if kind == "offset-index" else check_time_index
            found, warnings = checker(name, data, base, check)
            problems += found
            if check.problem is not None:
                warnings.append(f"{log_path.name} is damaged from position "
                                f"{check.problem.position}; entries were checked against the "
                                f"batches before it")
        from storage.index import OFFSET_ENTRY, TIME_ENTRY

        width = OFFSET_ENTRY.size if kind == "offset-index" else TIME_ENTRY.size
        summary = f"{len(data) // width} entries"
    else:
        summary = _verify_other(path, name, kind, problems)
    ok = not problems
    if not ok:
        trailers.damaged_files.append(name)
    if opts.json:
        out.write(json_line({"file": name, "type": kind, "ok": ok,
                             "problems": [p.to_json() for p in problems],
                             "warnings": warnings, **doc}) + "\n")
        return
    out.write(f"Verifying {name}\n")
    out.writelines(f"{p}\n" for p in problems)
    out.writelines(f"{name}: warning: {w}\n" for w in warnings)
    out.write(f"{name}: ok: {summary}\n" if ok else
              f"{name}: damaged: {len(problems)} problem{'s' * (len(problems) != 1)}\n")


def _verify_other(path: Path, name: str, kind: str, problems: list[Problem]) -> str:
    from storage.errors import CheckpointError

    data = bytes(read_only(path))
    if kind == "producer-snapshot":
        try:
            return f"{len(parse_producer_snapshot(data))} producers"
        except ValueError as error:
            problems.append(Problem(name, 0, str(error)))
    elif kind == "txn-index":
        if len(data) % TXN_ENTRY.size:
            problems.append(Problem(name, len(data) - len(data) % TXN_ENTRY.size,
                                    f"{len(data) % TXN_ENTRY.size} bytes at the end are not a "
                                    f"whole {TXN_ENTRY.size}-byte entry"))
        entries = parse_txn_index(data)
        for i in range(1, len(entries)):
            if entries[i][3] <= entries[i - 1][3]:
                problems.append(Problem(name, i * TXN_ENTRY.size, f"entry {i}: last offset "
                                        f"{entries[i][3]} is not above the previous entry's"))
        return f"{len(entries)} entries"
    elif kind in ("offset-checkpoint", "epoch-checkpoint"):
        try:
            return f"{len(read_checkpoint(path))} entries"
        except CheckpointError as error:
            line = int(getattr(error, "line_number", 1) or 1)
            position = sum(len(x) for x in data.splitlines(keepends=True)[:line - 1])
            problems.append(Problem(name, position, str(error)))      # it names the line
    else:
        return "not a file dump-log knows; not checked"
    return "damaged"


def _deep_problems(path: Path, name: str, check: LogCheck) -> list[Problem]:
    """Decode the records of every valid batch (``--verify --deep-iteration``)."""
    from storage.errors import CorruptRecordError
    from storage.records import RecordBatch

    data = read_only(path)
    problems = []
    for position in check.positions.tolist():
        try:
            RecordBatch(data[position:], position, path).records(check_crc=False)  # checked
        except CorruptRecordError as error:
            problems.append(Problem(name, position, f"records do not decode: {error}"))
    return _capped(problems)


def _log_check_json(check: LogCheck) -> dict[str, Any]:
    return {"size": check.size, "batches": check.batches, "records": check.records,
            "firstOffset": int(check.base_offsets[0]) if check.batches else None,
            "lastOffset": check.last_offset, "validBytes": check.valid_bytes,
            "truncatedBytes": check.truncated_bytes, "droppedBatches": check.dropped_batches,
            "droppedRecords": check.dropped_records}


__all__ = ["DumpOptions", "LogCheck", "Problem", "check_log", "check_offset_index",
           "check_time_index", "control_json", "control_text", "decoder", "dump_file",
           "file_kind", "parse_producer_snapshot", "read_checkpoint", "read_only", "register",
           "run", "verify_file"]
