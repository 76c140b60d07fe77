"""``strata consume TOPIC``: records from an offset up to the log end (as of the call), or
``--max`` of them.

Text output is one record per line, ``key<TAB>value`` (the input format of ``strata produce``; a
null is printed as ``--null-marker``, default empty), or the value only with ``--value-only``;
``--print-offsets`` puts ``partition<TAB>offset<TAB>`` first. ``--json`` prints one JSON document
per record (JSON Lines): partition, offset, timestamp, key, value and headers, where bytes that
are not UTF-8 become ``{"base64": ...}``. Without ``--partition`` every partition is read, in
order.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cluster.commands import (add_common_args, connect, disconnect, offset_number,
                              partition_number, text_or_base64)
from cluster.tools import EXIT_OK, UsageError


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
    parser.add_argument("--max", type=int, default=None, dest="max_records",
                        help="stop after this many records")
    parser.add_argument("--value-only", action="store_true", help="print values only")
    parser.add_argument("--print-offsets", action="store_true",
                        help="print partition and offset before each record")
    parser.add_argument("--separator", default="\t", help="between key and value (default TAB)")
    parser.add_argument("--null-marker", default="", help="printed for a null key or value")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from cluster.errors import UnknownTopicError
    from cluster.tools.output import json_line

    if args.max_records is not None and args.max_records < 0:
        raise UsageError("--max must not be negative")
    cluster = connect(args)
    out = sys.stdout
    try:
        infos = {t.name: t for t in cluster.list_topics()}
        if args.topic not in infos:
            raise UsageError(f"the cluster has no topic {args.topic}")
        partitions = sorted(infos[args.topic].partitions)
        if args.partition is not None:
            if args.partition not in partitions:
                raise UsageError(f"topic {args.topic} has no partition {args.partition}")
            partitions = [args.partition]
        left = args.max_records
        for partition in partitions:
            if left == 0:
                break
            try:
                records = cluster.consume(args.topic, partition, from_offset=args.from_offset)
            except UnknownTopicError as err:
                raise UsageError(str(err)) from None
            for record in records:
                if args.json:
                    out.write(json_line(_record_json(partition, record)) + "\n")
                else:
                    out.write(_record_text(partition, record, args) + "\n")
                if left is not None:
                    left -= 1
                    if left == 0:
                        break
        out.flush()
    finally:
        disconnect()
    return EXIT_OK


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
