"""The options of the ``strata`` and ``strata-stats`` data sources, parsed once (STYLE.md P8).

Every option a source takes is in ``KNOWN_OPTIONS`` (name, where it applies, Kafka's name when
Kafka's Spark source has the same option under another name); ``check_options`` refuses, with a
``SourceOptionError`` naming it, an option that is unknown, that Kafka's source has but we do not
support, or that does not apply to the operation (``endingOffsets`` in a stream, ``compression``
in a read): an option is never silently ignored. Names are case-insensitive, as Spark's.

Every source (the only options of ``strata-stats``):
    ``address``     Ray address, ``auto`` (default: ``RAY_ADDRESS``, else the cluster on this host)
    ``namespace``   the Strata cluster's Ray namespace (default ``strata``)
``strata`` (read and write):
    ``topic``       required
``strata`` write:
    ``batchBytes``  target size of one record batch (default 1 MiB; never above the topic's
                    ``max.message.bytes``)
    ``compression`` none (default), gzip, snappy, lz4, zstd
    ``flush``       true (default): the job's commit flushes every partition of the topic, so a
                    finished write survives a crash of any process (a transactional write's
                    markers flush every partition it wrote, whatever this says)
    ``transactional``        true (default): the job is one transaction, committed by the
                    job's commit (the task attempts that succeeded) or aborted; read_committed
                    readers see all of its rows or none. false: idempotent batches, visible as
                    they are appended (a failed job leaves what its tasks wrote)
    ``transactionTimeoutMs`` the job's transaction is aborted by the cluster when it is still
                    open after this long (Kafka's producer ``transaction.timeout.ms``; default the
                    cluster's ``transaction.timeout.ms``, 60 s; at most
                    ``transaction.max.timeout.ms``, 15 min); ``transaction.timeout.ms`` is taken
                    too
``strata`` streaming write (``writeStream``; the write options above apply too):
    ``checkpointLocation``   required by Spark; the sink's transactional id is derived from it,
                    so a query restarted from its checkpoint is the same sink
    ``transactionalId``      the sink's transactional id instead (two queries must never share
                    one)
``strata`` read (batch and stream):
    ``startingOffsets``  ``earliest`` (batch default), ``latest`` (stream default), or JSON
                         ``{"0": 42, "1": -2}`` / ``{"orders": {"0": 42}}`` as Spark's Kafka source
                         takes it (-2 earliest, -1 latest; partitions not named start at the
                         earliest)
    ``startingTimestamp``           epoch ms: every partition starts at its first record with a
                                    timestamp at or after it (takes precedence, as in Kafka)
    ``startingOffsetsByTimestamp``  JSON ``{"0": ts, ...}`` (or under the topic's name): the same
                                    per partition (before ``startingOffsets``, as in Kafka)
    ``startingOffsetsByTimestampStrategy``  ``error`` (default, Kafka's): a partition with no record
                                    that recent fails the query; ``latest``: it starts at the latest
    ``isolation``        ``read_committed`` (default) or ``read_uncommitted``; Kafka's name is
                         ``kafka.isolation.level`` (accepted too)
    ``failOnDataLoss``   true (default): a starting offset below the partition's log start offset
                         (retention deleted it) fails the read naming it; false: read from the log
                         start and log a warning
    ``valueFormat``      ``binary`` (default) or ``msgpack``: values are maps, decoded into the
                         columns of ``valueSchema`` (a DDL string, e.g. ``"price DOUBLE, qty INT"``)
                         that replace the ``value`` column
    ``rowsPerBatch``     rows per Arrow batch handed to Spark (default 65536)
``strata`` batch read:
    ``endingOffsets``    ``latest`` (default: the last stable offset, read_committed, or the log
                         end) or JSON as ``startingOffsets`` (-1 latest)
    As Kafka's source (``KafkaSourceProvider.validateBatchOptions``), a batch read refuses a start
    at the latest (``startingOffsets=latest``, or -1 for a partition in its JSON) and an end at
    the earliest (``endingOffsets=earliest``, or -2 for a partition): such a read is always empty.
``strata`` stream read:
    ``maxOffsetsPerTrigger`` (Kafka's name) or ``maxRecordsPerTrigger``: at most this many offsets
                         per micro-batch, split over the partitions in proportion to what each has
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from cluster.naming import DEFAULT_NAMESPACE
from cluster.spark.errors import SourceOptionError
from storage import files
from storage.errors import StorageError
from storage.record_format import Compression   # not storage.records: planners load no numba

EARLIEST, LATEST = -2, -1
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"

# where an option applies
BATCH_READ, STREAM_READ, WRITE = "batch read", "stream read", "write"
STATS_READ = "stats read"                       # a read of the strata-stats source
READS = frozenset({BATCH_READ, STREAM_READ})
EVERYWHERE = frozenset({BATCH_READ, STREAM_READ, WRITE})
CONNECTING = EVERYWHERE | {STATS_READ}


@dataclass(frozen=True)
class OptionSpec:
    """One option of the ``strata`` source: its name, the operations it applies to, and Kafka's
    name for it when Kafka's Spark source names it differently (an alias we accept)."""

    name: str
    applies: frozenset[str]
    kafka_name: str | None = None


KNOWN_OPTIONS: list[OptionSpec] = [
    OptionSpec("address", CONNECTING),
    OptionSpec("namespace", CONNECTING),
    OptionSpec("topic", EVERYWHERE),
    # reads
    OptionSpec("startingOffsets", READS),
    OptionSpec("startingTimestamp", READS),
    OptionSpec("startingOffsetsByTimestamp", READS),
    OptionSpec("startingOffsetsByTimestampStrategy", READS),
    OptionSpec("isolation", READS, kafka_name="kafka.isolation.level"),
    OptionSpec("failOnDataLoss", READS),
    OptionSpec("valueFormat", READS),
    OptionSpec("valueSchema", READS),
    OptionSpec("rowsPerBatch", READS),
    OptionSpec("endingOffsets", frozenset({BATCH_READ})),
    OptionSpec("maxRecordsPerTrigger", frozenset({STREAM_READ}), kafka_name="maxOffsetsPerTrigger"),
    # writes
    OptionSpec("batchBytes", frozenset({WRITE})),
    OptionSpec("compression", frozenset({WRITE})),
    OptionSpec("flush", frozenset({WRITE})),
    OptionSpec("checkpointLocation", frozenset({WRITE})),   # Spark hands it to a streaming sink
    OptionSpec("path", frozenset({WRITE})),                 # Spark's name for the sink's checkpoint
    OptionSpec("transactional", frozenset({WRITE})),
    OptionSpec("transactionTimeoutMs", frozenset({WRITE}), kafka_name="transaction.timeout.ms"),
    OptionSpec("transactionalId", frozenset({WRITE}), kafka_name="transactional.id"),
]
"""The one table of options: a new option is added here (and parsed below), never read from the
options map without being listed."""

UNSUPPORTED_KAFKA_OPTIONS: dict[str, str] = {
    "subscribe": "name the topic with .option('topic', ...)",
    "subscribePattern": "read one topic at a time with .option('topic', ...)",
    "assign": "name the topic with .option('topic', ...) and pick partitions with a filter",
    "endingTimestamp": "give endingOffsets instead",
    "endingOffsetsByTimestamp": "give endingOffsets instead",
    "minOffsetsPerTrigger": "only maxOffsetsPerTrigger/maxRecordsPerTrigger is supported",
    "maxTriggerDelay": "only maxOffsetsPerTrigger/maxRecordsPerTrigger is supported",
    "minPartitions": "a read groups whole topic partitions into as many Spark tasks as the "
                     "session has cores, and never splits a topic partition",
    "maxRecordsPerPartition": "a read groups whole topic partitions into as many Spark tasks "
                              "as the session has cores, and never splits a topic partition",
    "includeHeaders": "the headers column is always there",
    "groupIdPrefix": "a Strata read uses no consumer group",
}


def _spec_by_name() -> dict[str, OptionSpec]:
    out = {}
    for spec in KNOWN_OPTIONS:
        out[spec.name.lower()] = spec
        if spec.kafka_name:
            out[spec.kafka_name.lower()] = spec
    return out


def source_name(operation: str) -> str:
    """The data source an operation belongs to, as the user names it in ``format(...)``."""
    return "strata-stats" if operation == STATS_READ else "strata"


def check_options(options: Mapping[str, str], operation: str) -> None:
    """Refuse (``SourceOptionError`` naming it) an option that is not in ``KNOWN_OPTIONS``, one of
    Kafka's that we do not support, one that does not apply to ``operation`` (``BATCH_READ``,
    ``STREAM_READ``, ``WRITE`` of ``strata``; ``STATS_READ`` of ``strata-stats``), and an option
    given under both its name and Kafka's. An unknown option's error suggests the closest known
    name of the same source."""
    source = source_name(operation)
    operations = {operation} if operation == STATS_READ else set(EVERYWHERE)
    specs = _spec_by_name()
    unsupported = {} if operation == STATS_READ else {
        k.lower(): (k, why) for k, why in UNSUPPORTED_KAFKA_OPTIONS.items()}
    seen: dict[str, str] = {}
    for given in options:
        key = given.lower()
        if key in unsupported:
            name, why = unsupported[key]
            raise SourceOptionError(f"option {name} of Kafka's source is not supported by the "
                                    f"strata source: {why}", option=name)
        spec = specs.get(key)
        if spec is None:
            raise SourceOptionError(_unknown(given, source, operations), option=given)
        if spec.kafka_name and key == spec.kafka_name.lower():
            given = spec.kafka_name            # Spark lower-cases names: show them as documented
        elif key == spec.name.lower():
            given = spec.name
        if operation not in spec.applies:
            where = " and ".join(sorted(spec.applies - {STATS_READ})) \
                if operation == STATS_READ else " and ".join(sorted(spec.applies))
            raise SourceOptionError(f"option {given} does not apply to a {operation} of the "
                                    f"{source} source (only to a {where}"
                                    f"{' of the strata source' if source != 'strata' else ''})",
                                    option=given)
        if spec.name in seen:
            raise SourceOptionError(f"options {seen[spec.name]} and {given} are the same option "
                                    f"({spec.name}): give one", option=spec.name)
        seen[spec.name] = given


def _unknown(given: str, source: str, operations: set[str]) -> str:
    """The message for an option ``source`` does not know, with the closest known name."""
    known = sorted({s.name for s in KNOWN_OPTIONS if s.applies & operations}
                   | {s.kafka_name for s in KNOWN_OPTIONS
                      if s.kafka_name and s.applies & operations})
    lowered = [k.lower() for k in known]
    close = difflib.get_close_matches(given.lower(), lowered, n=1)
    hint = f" (did you mean {known[lowered.index(close[0])]}?)" if close else ""
    return f"unknown option {given!r} of the {source} source{hint}; known: {', '.join(known)}"


def _get(options: Mapping[str, str], key: str) -> str | None:
    """Option names are case-insensitive (Spark lower-cases them on the way in); an option with a
    Kafka name in ``KNOWN_OPTIONS`` is found under either."""
    for name in (key, key.lower()):
        if options.get(name) is not None:
            return options[name]
    spec = _spec_by_name().get(key.lower())
    if spec is not None and spec.kafka_name:
        for name in (spec.kafka_name, spec.kafka_name.lower()):
            if options.get(name) is not None:
                return options[name]
    return None


@dataclass(frozen=True)
class Connection:
    address: str
    namespace: str


def connection(options: Mapping[str, str]) -> Connection:
    return Connection(_get(options, "address") or "auto",
                      _get(options, "namespace") or DEFAULT_NAMESPACE)


def topic(options: Mapping[str, str]) -> str:
    name = _get(options, "topic")
    if not name:
        raise SourceOptionError("the strata source needs a topic: .option('topic', 'orders')",
                                option="topic")
    return name


def positive_int(options: Mapping[str, str], key: str, default: int) -> int:
    raw = _get(options, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise SourceOptionError(f"option {key} must be a positive integer, not {raw!r}",
                                option=key, value=raw)
    return value


def boolean(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = _get(options, key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise SourceOptionError(f"option {key} must be true or false, not {raw!r}", option=key,
                            value=raw)


def compression(options: Mapping[str, str]) -> Compression:
    raw = (_get(options, "compression") or "none").strip().upper()
    try:
        return Compression[raw]
    except KeyError:
        raise SourceOptionError(
            f"option compression must be one of {[c.name.lower() for c in Compression]}, not "
            f"{raw.lower()!r}", option="compression", value=raw) from None


def value_format(options: Mapping[str, str]) -> str:
    raw = (_get(options, "valueFormat") or "binary").strip().lower()
    if raw not in ("binary", "msgpack"):
        raise SourceOptionError(f"option valueFormat must be binary or msgpack, not {raw!r}",
                                option="valueFormat", value=raw)
    if raw == "msgpack" and not _get(options, "valueSchema"):
        raise SourceOptionError("valueFormat msgpack needs the value's columns: "
                                ".option('valueSchema', 'price DOUBLE, qty INT')",
                                option="valueSchema")
    return raw


def starting_offsets(options: Mapping[str, str], topic_name: str, default: int = EARLIEST
                     ) -> tuple[int, dict[int, int]]:
    """(default for partitions not named, {partition: offset}); offsets may be EARLIEST/LATEST."""
    raw = (_get(options, "startingOffsets") or "").strip()
    if not raw:
        return default, {}
    if raw.lower() == "earliest":
        return EARLIEST, {}
    if raw.lower() == "latest":
        return LATEST, {}
    return EARLIEST, _partition_json(raw, "startingOffsets", topic_name, "offsets", EARLIEST)


def _partition_json(raw: str, option: str, topic_name: str, what: str,
                    minimum: int) -> dict[int, int]:
    """``{"0": 42}`` or ``{"<topic>": {"0": 42}}`` -> {0: 42}; values integers >= ``minimum``."""
    try:
        parsed = json.loads(raw)
        if isinstance(parsed, dict) and topic_name in parsed \
                and isinstance(parsed[topic_name], dict):
            parsed = parsed[topic_name]
        if not isinstance(parsed, dict):
            raise ValueError("not a JSON object")
    except (ValueError, TypeError) as err:
        raise SourceOptionError(
            f"option {option} must be earliest, latest or JSON like "
            f"{{\"0\": 42}}, not {raw!r} ({err})", option=option, value=raw) from None
    chosen: dict[int, int] = {}
    for key, offset in parsed.items():
        try:
            partition = files.partition_from_text(key, topic_name)
            chosen[partition] = files.validate_offset(offset, f"{option}[{key!r}]",
                                                      partition=f"{topic_name}-{partition}",
                                                      minimum=minimum)
        except StorageError as err:
            raise SourceOptionError(
                f"option {option}: {err} (partitions are JSON keys of decimal digits, "
                f"{what} JSON integers{', -2 earliest, -1 latest' if minimum < 0 else ''})",
                option=option, value=raw) from None
    return chosen


@dataclass(frozen=True)
class StartingPosition:
    """Where a read starts in each partition, before it is resolved against the partitions'
    offsets (``cluster.spark.offsets.resolve_start``). In Kafka's order of precedence:
    ``startingTimestamp`` (``timestamp``), ``startingOffsetsByTimestamp`` (``timestamps``), then
    ``startingOffsets`` (``default`` and ``offsets``)."""

    default: int                                   # EARLIEST or LATEST, for partitions not named
    offsets: dict[int, int] = field(default_factory=dict)
    timestamp: int | None = None                   # every partition, epoch ms
    timestamps: dict[int, int] = field(default_factory=dict)   # per partition, epoch ms
    no_match_latest: bool = False                  # startingOffsetsByTimestampStrategy=latest
    option: str = "startingOffsets"                # the option it came from, for errors


def starting_position(options: Mapping[str, str], topic_name: str,
                      default: int) -> StartingPosition:
    """The start of a read (``default``: EARLIEST for a batch read, LATEST for a stream, as
    Kafka's source)."""
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError(f"option startingOffsetsByTimestampStrategy must be error or "
                                f"latest, not {strategy!r}",
                                option="startingOffsetsByTimestampStrategy", value=strategy)
    latest = strategy == "latest"
    raw = _get(options, "startingTimestamp")
    if raw is not None:
        try:
            ts = int(raw.strip())
        except ValueError:
            ts = -1
        if ts < 0:
            raise SourceOptionError(f"option startingTimestamp must be epoch milliseconds (an "
                                    f"integer >= 0), not {raw!r}", option="startingTimestamp",
                                    value=raw)
        return StartingPosition(EARLIEST, timestamp=ts, no_match_latest=latest,
                                option="startingTimestamp")
    raw = _get(options, "startingOffsetsByTimestamp")
    if raw is not None:
        stamps = _partition_json(raw.strip(), "startingOffsetsByTimestamp", topic_name,
                                 "timestamps", 0)
        return StartingPosition(EARLIEST, timestamps=stamps, no_match_latest=latest,
                                option="startingOffsetsByTimestamp")
    first, offsets = starting_offsets(options, topic_name, default)
    return StartingPosition(first, offsets)


def ending_offsets(options: Mapping[str, str], topic_name: str) -> dict[int, int]:
    """``endingOffsets`` of a batch read: {partition: exclusive end offset, or LATEST}; partitions
    not named end at the latest. An end at the earliest (``earliest``, or -2 for a partition) is
    refused, as Kafka's source refuses it for batch queries."""
    raw = (_get(options, "endingOffsets") or "latest").strip()
    if raw.lower() == "latest":
        return {}
    if raw.lower() == "earliest":
        raise SourceOptionError("option endingOffsets can't be earliest for a batch read (a read "
                                "that ends where it starts): give latest or offsets",
                                option="endingOffsets", value=raw)
    chosen = _partition_json(raw, "endingOffsets", topic_name, "offsets", EARLIEST)
    for partition, offset in sorted(chosen.items()):
        if offset == EARLIEST:
            raise SourceOptionError(
                f"option endingOffsets for {topic_name}-{partition} can't be earliest (-2) for a "
                f"batch read: give -1 (latest) or an offset", option="endingOffsets", value=raw,
                partition=partition)
    return chosen


def refuse_latest_start(position: StartingPosition, topic_name: str) -> None:
    """A batch read never starts at the latest (it would always be empty): Kafka's source refuses
    ``startingOffsets=latest`` and -1 for a partition of its JSON for batch queries, and so do
    we (``SourceOptionError`` naming the option and partition). A start by timestamp is fine."""
    if position.option != "startingOffsets":
        return
    if position.default == LATEST:
        raise SourceOptionError("option startingOffsets can't be latest for a batch read (it "
                                "would read nothing): give earliest or offsets, or use readStream",
                                option="startingOffsets", value="latest")
    for partition, offset in sorted(position.offsets.items()):
        if offset == LATEST:
            raise SourceOptionError(
                f"option startingOffsets for {topic_name}-{partition} can't be latest (-1) for a "
                f"batch read: give -2 (earliest) or an offset", option="startingOffsets",
                partition=partition)


def isolation(options: Mapping[str, str]) -> str:
    """``read_committed`` (default) or ``read_uncommitted`` (Kafka's ``isolation.level``)."""
    raw = (_get(options, "isolation") or READ_COMMITTED).strip().lower()
    if raw not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise SourceOptionError(f"option isolation must be {READ_COMMITTED} or "
                                f"{READ_UNCOMMITTED}, not {raw!r}", option="isolation", value=raw)
    return raw


def fail_on_data_loss(options: Mapping[str, str]) -> bool:
    return boolean(options, "failOnDataLoss", True)


def max_offsets_per_trigger(options: Mapping[str, str]) -> int | None:
    """``maxRecordsPerTrigger`` / Kafka's ``maxOffsetsPerTrigger``; None: no limit."""
    if _get(options, "maxRecordsPerTrigger") is None:
        return None
    return positive_int(options, "maxRecordsPerTrigger", 1)


@dataclass(frozen=True)
class ReadSettings:
    """The options every read (batch or stream) takes, checked and parsed."""

    topic: str
    value_format: str
    rows_per_batch: int
    position: StartingPosition
    isolation: str
    fail_on_data_loss: bool


def read_settings(options: Mapping[str, str], operation: str) -> ReadSettings:
    """Check ``options`` for a ``BATCH_READ`` or ``STREAM_READ`` and parse what both take (a batch
    read starts at the earliest by default, a stream at the latest, as in Kafka's source; a batch
    read that would start at the latest is refused, ``refuse_latest_start``)."""
    check_options(options, operation)
    name = topic(options)
    position = starting_position(options, name, EARLIEST if operation == BATCH_READ else LATEST)
    if operation == BATCH_READ:
        refuse_latest_start(position, name)
    return ReadSettings(
        name, value_format(options), positive_int(options, "rowsPerBatch", 1 << 16), position,
        isolation(options), fail_on_data_loss(options))


def value_schema(options: Mapping[str, str]) -> str:
    return _get(options, "valueSchema") or ""


def transaction_timeout_ms(options: Mapping[str, str]) -> int | None:
    """``transactionTimeoutMs`` (or Kafka's ``transaction.timeout.ms``); None: the cluster's."""
    for key in ("transactionTimeoutMs", "transaction.timeout.ms"):
        if _get(options, key) is not None:
            return positive_int(options, key, 0)
    return None
