"""``strata dump-log`` of record batches (``.log``, KRaft ``.checkpoint``): Kafka's DumpLogSegments
lines and their ``--json`` form, the key/value decoders, control records and KRaft's records."""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, TextIO, cast

from ops.tools.output import json_line, printable
from ops.tools.dump_log_common import (
    BOOTSTRAP_SNAPSHOT,
    CONTROL_TYPES,
    DumpOptions,
    INT32_MAX,
    TOPIC_DECODERS,
    Trailers,
    _segment_base,
    read_only,
)

if TYPE_CHECKING:
    from storage.records import Record, RecordBatch


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
