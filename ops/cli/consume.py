"""``strata consume TOPIC``: records from an offset (or ``--from-timestamp``: the first offset whose
timestamp is at or after it, Kafka's offsetsForTimes) up to the log end (as of the call), or
``--max-messages`` of them. ``--follow`` keeps reading the records produced afterwards, polling
every ``--poll-interval`` seconds, until ``--max-messages`` records were printed or Ctrl-C
(SIGINT), which ends it quietly with exit code 0.

Text output is one record per line, ``key<TAB>value`` (the input format of ``strata produce``; a
null is printed as ``--null-marker``, default empty), or the value only with ``--value-only``;
``--print-offsets`` puts ``partition<TAB>offset<TAB>`` first. A ``--from-offset`` past a
partition's log end is refused (exit 2) naming where the log ends, as a fetch there is Kafka's
``OffsetOutOfRange``. ``--json`` prints one JSON document
per record (JSON Lines): partition, offset, timestamp, key, value and headers, where bytes that
are not UTF-8 become ``{"base64": ...}``. Without ``--partition`` every partition is read, in
order.

A read the cluster refuses (a corrupt batch, an offline directory) ends the command with one
line on stderr naming the error, and exit code 1 (the records of earlier reads stay printed).

Records are decoded by the node holding the partition (``Cluster.read_records``, in chunks of at
most ``--max-messages``), so the command itself loads no decoder.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Iterator

from ops.cli import (add_common_args, connect, disconnect, offset_number,
                              partition_number, text_or_base64)
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError

CHUNK = 10_000   # records per read call


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consume", help="print records from an offset",
        description="Print the records of a partition (or of every partition) from an offset.")
    add_common_args(parser, json_help="one JSON document per record (JSON Lines)")
    parser.add_argument("topic", help="the topic to read")
    parser.add_argument("--partition", type=partition_number, default=None,
                        help="the partition (default: every partition, in order)")
    parser.add_argument("--from-offset", "--offset", type=offset_number, default=0,
                        dest="from_offset",
                        help="first offset (default 0; below the log start means the start)")
    parser.add_argument("--from-timestamp", type=offset_number, default=None,
                        metavar="EPOCH_MS",
                        help="start at the first record whose timestamp is at or after this "
                             "time (epoch ms); a partition with none starts at its end")
    parser.add_argument("--max-messages", "--max", type=int, default=None, dest="max_records",
                        metavar="N", help="stop after this many records")
    parser.add_argument("--follow", action="store_true",
                        help="keep reading new records until --max-messages or Ctrl-C")
    parser.add_argument("--poll-interval", type=float, default=0.2, metavar="SECONDS",
                        help="with --follow: how often to look for new records (default 0.2)")
    parser.add_argument("--value-only", action="store_true", help="print values only")
    parser.add_argument("--print-offsets", action="store_true",
                        help="print partition and offset before each record")
    parser.add_argument("--separator", default="\t", help="between key and value (default TAB)")
    parser.add_argument("--null-marker", default="", help="printed for a null key or value")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.errors import UnknownTopicError
    from storage.errors import StorageError

    if args.max_records is not None and args.max_records < 0:
        raise UsageError("--max-messages must not be negative")
    if args.from_timestamp is not None and args.from_offset:
        raise UsageError("give --from-offset or --from-timestamp, not both")
    if args.poll_interval <= 0:
        raise UsageError("--poll-interval must be above 0")
    cluster = connect(args)
    out = sys.stdout
    try:
        infos = {t.name: t for t in cluster.list_topics(include_internal=True)}
        if args.topic not in infos:
            raise UsageError(f"the cluster has no topic {args.topic}")
        partitions = sorted(infos[args.topic].partitions)
        if args.partition is not None:
            if args.partition not in partitions:
                raise UsageError(f"topic {args.topic} has no partition {args.partition}")
            partitions = [args.partition]
        try:
            starts = {p: _start(cluster, args, p) for p in partitions}
            if args.from_timestamp is None and args.from_offset > 0:
                _refuse_past_end(cluster, args.topic, starts)
            chunk = min(args.max_records or CHUNK, CHUNK)
            records = (_follow(cluster, args.topic, starts, args.poll_interval, chunk)
                       if args.follow else _read(cluster, args.topic, starts, chunk))
            _print(records, args, out)
        except UnknownTopicError as err:
            raise UsageError(str(err)) from None
        except StorageError as err:   # a corrupt batch, an offline directory: one line
            out.flush()
            print(f"strata consume: {type(err).__name__}: {err}", file=sys.stderr)
            return EXIT_PROBLEMS
        except KeyboardInterrupt:
            if not args.follow:
                raise
        out.flush()
    finally:
        disconnect()
    return EXIT_OK


def _start(cluster: Any, args: argparse.Namespace, partition: int) -> int:
    if args.from_timestamp is None:
        return args.from_offset
    found = cluster.offset_for_time(args.topic, partition, args.from_timestamp)
    return cluster.offsets(args.topic, partition)[1] if found is None else found


def _refuse_past_end(cluster: Any, topic: str, starts: dict[int, int]) -> None:
    """``UsageError`` naming each partition whose log ends before its start offset: a fetch
    there is Kafka's ``OffsetOutOfRange`` (reading at the log end itself is fine: nothing yet)."""
    past = []
    for partition, start in starts.items():
        end = cluster.offsets(topic, partition)[1]
        if start > end:
            past.append(f"{topic}-{partition} ends at offset {end}")
    if past:
        start = next(iter(starts.values()))
        raise UsageError(f"offset {start} is past the end: " + ", ".join(past)
                         + " (the log end offset is the next offset to be written; "
                         "`strata topic offsets` lists them)")


def _read(cluster: Any, topic: str, starts: dict[int, int],
          chunk: int) -> Iterator[tuple[int, Any]]:
    """Each partition's records from its start to its end as of the call, partition by
    partition."""
    for partition, start in starts.items():
        end = cluster.offsets(topic, partition)[1]
        for record in _records(cluster, topic, partition, start, end, chunk):
            yield partition, record


def _follow(cluster: Any, topic: str, starts: dict[int, int], poll_interval_s: float,
            chunk: int) -> Iterator[tuple[int, Any]]:
    """Every partition's records from its start, then the ones appended later, for ever."""
    import time

    positions = dict(starts)
    while True:
        idle = True
        for partition, position in positions.items():
            for record in _records(cluster, topic, partition, position, None, chunk):
                idle = False
                positions[partition] = record.offset + 1
                yield partition, record
        if idle:
            time.sleep(poll_interval_s)


def _records(cluster: Any, topic: str, partition: int, start: int, stop: int | None,
             chunk: int) -> Iterator[Any]:
    """The records of one partition from ``start`` (below ``stop``, else up to its end), read
    ``chunk`` at a time."""
    offset = start
    while stop is None or offset < stop:
        records = cluster.read_records(topic, partition, offset, chunk, max_offset=stop)
        yield from records
        if len(records) < chunk:
            return
        offset = records[-1].offset + 1


def _print(records: Iterator[tuple[int, Any]], args: argparse.Namespace, out: Any) -> None:
    from ops.tools.output import json_line

    left = args.max_records
    if left == 0:
        return
    for partition, record in records:
        if args.json:
            out.write(json_line(_record_json(partition, record)) + "\n")
        else:
            out.write(_record_text(partition, record, args) + "\n")
        if args.follow:
            out.flush()
        if left is not None:
            left -= 1
            if left == 0:
                return


def _record_json(partition: int, record: Any) -> dict[str, Any]:
    return {"partition": partition, "offset": record.offset, "timestamp": record.timestamp,
            "key": text_or_base64(record.key), "value": text_or_base64(record.value),
            "headers": [[k, text_or_base64(v)] for k, v in record.headers]}


def _record_text(partition: int, record: Any, args: argparse.Namespace) -> str:
    def text(data: bytes | None) -> str:
        return args.null_marker if data is None else data.decode("utf-8", "backslashreplace")

    line = text(record.value) if args.value_only else \
        f"{text(record.key)}{args.separator}{text(record.value)}"
    if args.print_offsets:
        line = f"{partition}{args.separator}{record.offset}{args.separator}{line}"
    return line
