"""The options of the ``strata`` and ``strata-stats`` data sources, parsed once (STYLE.md P8).

Every source:
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
``strata`` read:
    ``startingOffsets``  ``earliest`` (default), ``latest``, or JSON ``{"0": 42, "1": -2}`` /
                         ``{"orders": {"0": 42}}`` as Spark's Kafka source takes it (-2 earliest,
                         -1 latest; partitions not named start at the earliest)
    ``valueFormat``      ``binary`` (default) or ``msgpack``: values are maps, decoded into the
                         columns of ``valueSchema`` (a DDL string, e.g. ``"price DOUBLE, qty INT"``)
                         that replace the ``value`` column
    ``rowsPerBatch``     rows per Arrow batch handed to Spark (default 65536)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from cluster.naming import DEFAULT_NAMESPACE
from cluster.spark.errors import SourceOptionError
from storage import files
from storage.errors import StorageError
from storage.records import Compression

EARLIEST, LATEST = -2, -1


def _get(options: Mapping[str, str], key: str) -> str | None:
    """Option names are case-insensitive (Spark lower-cases them on the way in)."""
    value = options.get(key)
    return value if value is not None else options.get(key.lower())


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


def starting_offsets(options: Mapping[str, str], topic_name: str) -> tuple[int, dict[int, int]]:
    """(default for partitions not named, {partition: offset}); offsets may be EARLIEST/LATEST."""
    raw = (_get(options, "startingOffsets") or "earliest").strip()
    if raw.lower() == "earliest":
        return EARLIEST, {}
    if raw.lower() == "latest":
        return LATEST, {}
    try:
        parsed = json.loads(raw)
        if isinstance(parsed, dict) and topic_name in parsed \
                and isinstance(parsed[topic_name], dict):
            parsed = parsed[topic_name]
        if not isinstance(parsed, dict):
            raise ValueError("not a JSON object")
    except (ValueError, TypeError) as err:
        raise SourceOptionError(
            f"option startingOffsets must be earliest, latest or JSON like "
            f"{{\"0\": 42}}, not {raw!r} ({err})", option="startingOffsets", value=raw) from None
    chosen: dict[int, int] = {}
    for key, offset in parsed.items():
        try:
            partition = files.partition_from_text(key, topic_name)
            chosen[partition] = files.validate_offset(offset, f"startingOffsets[{key!r}]",
                                                      partition=f"{topic_name}-{partition}",
                                                      minimum=EARLIEST)
        except StorageError as err:
            raise SourceOptionError(
                f"option startingOffsets: {err} (partitions are JSON keys of decimal digits, "
                f"offsets JSON integers, -2 earliest, -1 latest)", option="startingOffsets",
                value=raw) from None
    return EARLIEST, chosen


def value_schema(options: Mapping[str, str]) -> str:
    return _get(options, "valueSchema") or ""


def transaction_timeout_ms(options: Mapping[str, str]) -> int | None:
    """``transactionTimeoutMs`` (or Kafka's ``transaction.timeout.ms``); None: the cluster's."""
    for key in ("transactionTimeoutMs", "transaction.timeout.ms"):
        if _get(options, key) is not None:
            return positive_int(options, key, 0)
    return None
