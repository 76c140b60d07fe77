"""``strata topic alter|describe|delete-records|offsets``: Kafka's everyday topic verbs on a
running cluster (registered under ``strata topic`` by ``ops.cli.topics``).

* ``alter TOPIC --config KEY=VALUE --delete-config KEY --partitions N``: kafka-configs
  ``--alter --add-config/--delete-config`` (dynamic topic configs: applied to the live logs,
  persisted, kept across restarts) and kafka-topics ``--alter --partitions`` (the new total). The
  config change runs first; a refused key changes nothing.
* ``describe [TOPIC]``: kafka-topics ``--describe`` plus our columns: each partition's directory,
  log start / end / last stable offset, size and segments, and the topic's overrides.
* ``delete-records TOPIC --partition P --before-offset O`` or ``--offset-json-file F``
  (kafka-delete-records' file: ``{"partitions":[{"topic":"t","partition":0,"offset":5}],
  "version":1}``; offset -1 means the high watermark): raises the log start offsets; the segments
  below go at the next retention check. Prints each partition's new low watermark, or its error
  (exit 1 when one failed).
* ``offsets TOPIC --time earliest|latest|<epoch ms>``: GetOffsetShell, one
  ``topic:partition:offset`` line per partition (the offset is empty when no record is that
  recent).

Every action takes ``--json``; a request the cluster refuses (unknown topic, bad key or value,
not an increase) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ops.cli import (add_common_args, connect, disconnect, jsonable, parse_config,
                              partition_count, partition_number, write)
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError

TIMES = {"earliest": -2, "latest": -1}


def register_actions(actions: argparse._SubParsersAction) -> None:
    alter = actions.add_parser(
        "alter", help="change a topic's config overrides or its partition count",
        description="Set (--config) or remove (--delete-config) topic overrides, applied to the "
                    "live logs and kept across restarts (Kafka's dynamic topic configs), and/or "
                    "grow the topic to --partitions partitions in total.")
    add_common_args(alter)
    alter.add_argument("topic", help="the topic to change")
    alter.add_argument("--config", action="append", metavar="KEY=VALUE",
                       help="set a topic override with Kafka's key (repeatable)")
    alter.add_argument("--delete-config", action="append", metavar="KEY", default=[],
                       help="remove a topic override, back to the broker default (repeatable)")
    alter.add_argument("--partitions", type=partition_count, default=None,
                       help="the new total number of partitions (must be an increase)")
    alter.set_defaults(handler=run_alter)

    describe = actions.add_parser(
        "describe", help="partitions with their directory, offsets, size and overrides",
        description="Every partition of TOPIC (of every topic without one): log directory, log "
                    "start / end / last stable offset, size, segments, and the overrides.")
    add_common_args(describe)
    describe.add_argument("topic", nargs="?", default=None,
                          help="the topic to describe (default: every topic)")
    describe.add_argument("--exclude-internal", action="store_true",
                          help="leave out internal topics (kafka-topics --exclude-internal)")
    describe.set_defaults(handler=run_describe)

    delete = actions.add_parser(
        "delete-records", help="delete the records before an offset (kafka-delete-records)",
        description="Raise the log start offset of partitions: records before it can no longer "
                    "be read, and the segments below it go at the next retention check.")
    add_common_args(delete)
    delete.add_argument("topic", nargs="?", default=None,
                        help="the topic (with --partition and --before-offset)")
    delete.add_argument("--partition", type=partition_number, default=None,
                        help="the partition whose records go")
    delete.add_argument("--before-offset", type=_offset_or_hw, default=None,
                        help="records below this offset go (-1: the high watermark)")
    delete.add_argument("--offset-json-file", type=Path, default=None,
                        help="Kafka's offsets file: {\"partitions\": [{\"topic\": T, "
                             "\"partition\": P, \"offset\": O}], \"version\": 1}")
    delete.set_defaults(handler=run_delete_records)

    offsets = actions.add_parser(
        "offsets", help="earliest, latest or by-time offsets per partition (GetOffsetShell)",
        description="One topic:partition:offset line per partition: earliest is the log start "
                    "offset, latest the log end (high watermark), an epoch time in ms the first "
                    "offset whose timestamp is at or after it (empty when there is none).")
    add_common_args(offsets)
    offsets.add_argument("topic", help="the topic whose partitions to list offsets of")
    offsets.add_argument("--time", type=_time, default=-1,
                         help="earliest, latest (default) or a timestamp in epoch ms")
    offsets.add_argument("--partition", type=partition_number, default=None,
                         help="one partition only (default: every partition)")
    offsets.set_defaults(handler=run_offsets)


# ---- argument types ------------------------------------------------------------------------------
def _offset_or_hw(text: str) -> int:
    if text == "-1":
        return -1
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not an offset (an integer >= 0, or -1)")
    return int(text)


def _time(text: str) -> int:
    if text in TIMES:
        return TIMES[text]
    if text in ("-1", "-2"):
        return int(text)
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not earliest, latest or a timestamp in epoch ms")
    return int(text)


def _refused(err: Exception) -> UsageError:
    return UsageError(str(err))


# ---- alter ---------------------------------------------------------------------------------------
def run_alter(args: argparse.Namespace) -> int:
    from storage.errors import StorageError

    config = parse_config(args.config)
    if not config and not args.delete_config and args.partitions is None:
        raise UsageError("nothing to alter: give --config, --delete-config or --partitions")
    cluster = connect(args)
    try:
        info = None
        if args.partitions is not None:   # refuse a decrease before any config changes
            current = len(cluster.partitions(args.topic))
            if args.partitions <= current:
                raise UsageError(f"topic {args.topic} has {current} partitions; "
                                 f"{args.partitions} would not be an increase (nothing changed)")
        if config or args.delete_config:
            info = cluster.alter_topic_config(args.topic, config, delete=args.delete_config)
        if args.partitions is not None:
            info = cluster.add_partitions(args.topic, args.partitions)
    except StorageError as err:   # unknown topic, bad key or value, not an increase
        raise _refused(err) from None
    finally:
        disconnect()
    assert info is not None
    document = {"name": info.name, "partitions": len(info.partitions),
                "config": dict(info.config)}
    if args.json:
        write(document)
    else:
        overrides = ", ".join(f"{k}={v}" for k, v in sorted(info.config.items())) or "none"
        print(f"altered topic {info.name}: {len(info.partitions)} partitions, "
              f"overrides {overrides}")
    return EXIT_OK


# ---- describe ------------------------------------------------------------------------------------
def run_describe(args: argparse.Namespace) -> int:
    from storage.errors import StorageError

    cluster = connect(args)
    try:
        partitions = cluster.describe_topic(args.topic)
    except StorageError as err:
        raise _refused(err) from None
    finally:
        disconnect()
    from cluster.naming import is_internal

    if args.exclude_internal:
        partitions = [p for p in partitions if not is_internal(p.topic)]
    topics: dict[str, dict[str, Any]] = {}
    for p in partitions:
        entry = topics.setdefault(p.topic, {"name": p.topic, "config": dict(p.config),
                                            "internal": is_internal(p.topic),
                                            "partitions": []})
        entry["partitions"].append({k: v for k, v in jsonable(p).items()
                                    if k not in ("topic", "config")})
    if args.json:
        write({"topics": list(topics.values())})
        return EXIT_OK
    from ops.tools.output import console, human_bytes, print_table

    out = console()
    for topic in topics.values():
        overrides = ",".join(f"{k}={v}" for k, v in sorted(topic["config"].items()))
        print(f"Topic: {topic['name']}\tPartitionCount: {len(topic['partitions'])}\t"
              f"Configs: {overrides}" + ("\tInternal: true" if topic["internal"] else ""),
              flush=True)
    print_table(out, None, ["topic", "partition", "log dir", "log start", "log end",
                            "last stable", "size", "segments"],
                [(p.topic, p.partition, p.log_dir, p.log_start_offset, p.log_end_offset,
                  p.last_stable_offset, human_bytes(p.size_bytes), p.segments)
                 for p in partitions])
    return EXIT_OK


# ---- delete-records ------------------------------------------------------------------------------
def run_delete_records(args: argparse.Namespace) -> int:
    from storage.errors import StorageError

    requests = _delete_requests(args)
    cluster = connect(args)
    results: list[dict[str, Any]] = []
    try:
        for topic, partition, offset in requests:
            entry: dict[str, Any] = {"topic": topic, "partition": partition, "offset": offset}
            try:
                entry["low_watermark"] = cluster.delete_records(topic, partition, offset)
            except StorageError as err:
                entry["error"] = f"{type(err).__name__}: {err}"
            results.append(entry)
    finally:
        disconnect()
    failed = any("error" in r for r in results)
    if args.json:
        write({"partitions": results})
    else:
        print("Records delete operation completed:")
        for r in results:
            outcome = (f"error: {r['error']}" if "error" in r
                       else f"low_watermark: {r['low_watermark']}")
            print(f"partition: {r['topic']}-{r['partition']}\t{outcome}")
    return EXIT_PROBLEMS if failed else EXIT_OK


def _delete_requests(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) from the arguments or the offsets file; refuses a mix, a
    missing part and a file Kafka's tool would refuse (bad JSON, version, duplicates)."""
    direct = (args.topic, args.partition, args.before_offset)
    if args.offset_json_file is not None:
        if any(v is not None for v in direct):
            raise UsageError("give either --offset-json-file or TOPIC --partition "
                             "--before-offset, not both")
        return offsets_file(args.offset_json_file)
    if any(v is None for v in direct):
        raise UsageError("give TOPIC, --partition and --before-offset (or --offset-json-file)")
    return [(args.topic, args.partition, args.before_offset)]


def offsets_file(path: Path) -> list[tuple[str, int, int]]:
    """The requests of a kafka-delete-records offsets file (``version`` 1)."""
    from storage import files
    from storage.errors import StorageError

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {path}: {err}") from None
    except ValueError as err:
        raise UsageError(f"{path} is not JSON: {err}") from None
    if not isinstance(document, dict) or document.get("version") != 1:
        raise UsageError(f"{path}: expected an object with \"version\": 1")
    entries = document.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: \"partitions\" must be a non-empty list")
    requests: list[tuple[str, int, int]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != {"topic", "partition", "offset"}:
            raise UsageError(f"{path}: partitions[{i}] must have exactly topic, partition and "
                             "offset")
        topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        try:
            files.validate_topic(topic)
            partition = files.validate_partition(partition, topic)
            offset = files.validate_offset(offset, "offset", minimum=-1)
        except StorageError as err:
            raise UsageError(f"{path}: partitions[{i}]: {err}") from None
        requests.append((topic, partition, offset))
    seen = [(t, p) for t, p, _ in requests]
    duplicates = sorted({f"{t}-{p}" for t, p in seen if seen.count((t, p)) > 1})
    if duplicates:
        raise UsageError(f"{path}: duplicate partitions {', '.join(duplicates)}")
    return requests


# ---- offsets -------------------------------------------------------------------------------------
def run_offsets(args: argparse.Namespace) -> int:
    from storage.errors import StorageError

    cluster = connect(args)
    rows: list[dict[str, Any]] = []
    try:
        if args.partition is not None:
            cluster.partition_dir(args.topic, args.partition)
            partitions = [args.partition]
        else:
            partitions = cluster.partitions(args.topic)
        for partition in partitions:
            found = cluster.list_offset(args.topic, partition, args.time)
            rows.append({"partition": partition,
                         "offset": None if found is None else found[0],
                         "timestamp": None if found is None else found[1]})
    except StorageError as err:
        raise _refused(err) from None
    finally:
        disconnect()
    if args.json:
        write({"topic": args.topic, "time": args.time, "partitions": rows})
    else:
        for r in rows:
            print(f"{args.topic}:{r['partition']}:{'' if r['offset'] is None else r['offset']}")
    return EXIT_OK
