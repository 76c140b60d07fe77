"""``strata cleaner status|explain|trigger|pause|resume``: the log cleaner of a running cluster.

* ``status``: the cleaner actors and what each cleans, Kafka's cleaner-manager gauges, uncleanable
  partitions, offline directories and the last cleans;
* ``explain TOPIC --partition P``: why the partition is (or is not) being cleaned;
* ``trigger``: clean it as soon as a cleaner is free, whatever its dirty ratio (``--roll`` rolls
  the active segment first so the tail is cleaned too; ``--wait`` returns when that clean ended);
* ``pause`` / ``resume``: abort any clean of the partition and keep it from being cleaned, and
  release that pause. A pause lives in the coordinator: a restarted coordinator forgets it.
"""

from __future__ import annotations

import argparse
from typing import Any

from cluster.commands import (add_common_args, connect, disconnect, jsonable,
                              partition_number, write)
from cluster.tools import EXIT_OK, EXIT_PROBLEMS, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cleaner", help="the log cleaner: status, explain, trigger, "
                                                   "pause, resume",
                                   description="Inspect and steer the log cleaner of a cluster.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    status = actions.add_parser("status", help="cleaners, gauges, uncleanable partitions",
                                description="The cleaner actors, Kafka's cleaner gauges, "
                                            "uncleanable partitions and the last cleans.")
    add_common_args(status)
    status.set_defaults(handler=run_status)

    for name, help_text, handler in (
            ("explain", "why a partition is or is not being cleaned", run_explain),
            ("trigger", "clean a partition now, whatever its dirty ratio", run_trigger),
            ("pause", "abort and pause cleaning of a partition", run_pause),
            ("resume", "resume cleaning of a paused partition", run_resume)):
        action = actions.add_parser(name, help=help_text, description=help_text[0].upper()
                                    + help_text[1:] + ".")
        add_common_args(action)
        action.add_argument("topic", help="the topic's name")
        action.add_argument("--partition", type=partition_number, default=0, help="(default 0)")
        if name == "trigger":
            action.add_argument("--roll", action="store_true",
                                help="roll the active segment first, so it is cleaned too")
            action.add_argument("--wait", action="store_true",
                                help="return once the clean has finished")
            action.add_argument("--timeout", type=float, default=120.0,
                                help="with --wait: seconds to wait for the clean (default 120)")
        action.set_defaults(handler=handler)


def run_status(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        status = cluster.cleaner_status()
    finally:
        disconnect()
    if args.json:
        write(status)
        return EXIT_OK
    from cluster.tools.output import console, human_bytes, print_table

    out = console()
    m = status.manager
    out.print(f"cleaner {'enabled' if status.enabled else 'disabled'}: "
              f"{status.compacted_partitions} compacted partitions, "
              f"{status.cleans_completed} cleans completed, {status.cleans_failed} failed; "
              f"max dirty {m.max_dirty_percent} %, max compaction delay "
              f"{m.max_compaction_delay_secs} s, time since last run "
              f"{m.time_since_last_run_ms} ms")
    print_table(out, "cleaners", ["cleaner", "name", "host", "state", "cleaning"],
                [(w.cleaner_id, w.name, w.host, w.state,
                  None if w.topic is None else f"{w.topic}-{w.partition}")
                 for w in status.workers])
    if status.uncleanable:
        print_table(out, "uncleanable partitions", ["partition", "log dir", "failures", "error"],
                    [(f"{u.topic}-{u.partition}", u.log_dir, u.failures, u.error)
                     for u in status.uncleanable], wrap=["error"])
    if status.offline_dirs:
        print_table(out, "offline log directories", ["log dir", "reason"],
                    sorted(status.offline_dirs.items()), wrap=["reason"])
    if status.recent:
        print_table(out, "last cleans",
                    ["partition", "cleaner", "outcome", "offsets", "read", "written", "seconds",
                     "error"],
                    [(f"{s.topic}-{s.partition}", s.cleaner_id, s.outcome,
                      f"{s.first_dirty_offset}..{s.next_dirty_offset}", human_bytes(s.bytes_read),
                      human_bytes(s.bytes_written), f"{s.elapsed_secs:.3f}", s.error)
                     for s in status.recent[-10:]], wrap=["error"])
    return EXIT_OK


def run_explain(args: argparse.Namespace) -> int:
    from cluster.errors import UnknownTopicError

    cluster = connect(args)
    try:
        explanation = cluster.explain(args.topic, args.partition)
    except UnknownTopicError as err:
        raise UsageError(str(err)) from None
    finally:
        disconnect()
    document = jsonable(explanation)
    if args.json:
        write(document)
        return EXIT_OK
    from cluster.tools.output import console, print_table

    out = console()
    out.print(f"{args.topic}-{args.partition}: [bold]{explanation.status.value}[/]: "
              f"{explanation.reason}")
    print_table(out, None, ["field", "value"],
                [(k, v) for k, v in document.items()
                 if k not in ("topic_partition", "status", "reason")])
    return EXIT_OK


def run_trigger(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        count = cluster.trigger_clean(args.topic, args.partition, roll=args.roll,
                                      wait=args.wait, timeout_s=args.timeout)
    except TimeoutError as err:
        print(f"strata cleaner trigger: {err}")
        return EXIT_PROBLEMS
    finally:
        disconnect()
    document: dict[str, Any] = {"topic": args.topic, "partition": args.partition,
                                "triggered": True, "waited": args.wait,
                                "cleans_completed": count}
    if args.json:
        write(document)
    elif args.wait:
        print(f"{args.topic}-{args.partition} cleaned ({count} cleans so far)")
    else:
        print(f"clean of {args.topic}-{args.partition} triggered")
    return EXIT_OK


def run_pause(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        cluster.pause_cleaning(args.topic, args.partition)
    finally:
        disconnect()
    if args.json:
        write({"topic": args.topic, "partition": args.partition, "paused": True})
    else:
        print(f"cleaning of {args.topic}-{args.partition} paused")
    return EXIT_OK


def run_resume(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        resumed = cluster.resume_cleaning(args.topic, args.partition)
    finally:
        disconnect()
    if args.json:
        write({"topic": args.topic, "partition": args.partition, "resumed": resumed})
    else:
        print(f"cleaning of {args.topic}-{args.partition} "
              + ("resumed" if resumed else "was not paused"))
    return EXIT_OK if resumed else EXIT_PROBLEMS
