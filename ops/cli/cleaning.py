"""``strata cleaner status|explain|trigger|pause|resume``: the log cleaner of a running cluster.

* ``status``: the cleaner actors and what each cleans, Kafka's cleaner-manager gauges, uncleanable
  partitions, offline directories and the last cleans;
* ``explain TOPIC --partition P``: why the partition is (or is not) being cleaned;
* ``trigger``: clean it as soon as a cleaner is free, whatever its dirty ratio (``--roll`` rolls
  the active segment first so the tail is cleaned too; ``--wait`` returns when that clean ended);
* ``pause`` / ``resume``: abort any clean of the partition and keep it from being cleaned, and
  release one such pause (pauses nest; ``resume`` says how many are still held, and never
  releases one the node took for truncation, deletion, a directory move or retention). A pause
  lives in the coordinator: a restarted coordinator forgets it.

A partition the cluster does not hold, a trigger of a paused partition and a resume of a partition
no operator paused are refused in one line; a trigger with nothing to clean says so and why.
"""

from __future__ import annotations

import argparse
from typing import Any

from ops.cli import (add_common_args, connect, disconnect, jsonable,
                              partition_number, write)
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError


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
    from ops.tools.output import console, human_bytes, print_table

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


def check_partition(cluster: Any, topic: str, partition: int) -> None:
    """``UsageError`` unless the cluster holds ``topic``-``partition``."""
    info = next((t for t in cluster.list_topics(include_internal=True) if t.name == topic), None)
    if info is None:
        raise UsageError(f"no topic {topic!r} in Strata cluster {cluster.namespace} "
                         "(`strata topic list` lists them)")
    if partition not in info.partitions:
        raise UsageError(f"topic {topic} has no partition {partition} (it has "
                         f"{len(info.partitions)}: 0..{len(info.partitions) - 1})")


def pauses(cluster: Any, topic: str, partition: int) -> tuple[int, int]:
    """(pauses an operator holds, all pauses held) of the partition's cleaning."""
    from cluster.handles import lookup
    from cluster.naming import COORDINATOR_NAME

    operator, held = lookup(COORDINATOR_NAME, cluster.namespace).call(
        "pauses", topic, partition, timeout=60)
    return operator, held


def run_explain(args: argparse.Namespace) -> int:
    from cluster.errors import UnknownTopicError

    cluster = connect(args)
    try:
        check_partition(cluster, args.topic, args.partition)
        explanation = cluster.explain(args.topic, args.partition)
    except UnknownTopicError as err:
        raise UsageError(str(err)) from None
    finally:
        disconnect()
    document = jsonable(explanation)
    if args.json:
        write(document)
        return EXIT_OK
    from ops.tools.output import console, markup_escape, print_table

    out = console()
    status = explanation.status.value
    reason = explanation.reason.removeprefix(f"{status}: ")
    out.print(f"{markup_escape(args.topic)}-{args.partition}: [bold]{status}[/]: "
              f"{markup_escape(reason)}", highlight=False)
    print_table(out, None, ["field", "value"],
                [(k, v) for k, v in document.items()
                 if k not in ("topic_partition", "status", "reason")])
    return EXIT_OK


def run_trigger(args: argparse.Namespace) -> int:
    from cluster.cleaning.pauses import pause_holders
    from cluster.errors import PartitionPausedError, UnknownTopicError

    tp = f"{args.topic}-{args.partition}"
    cluster = connect(args)
    try:
        check_partition(cluster, args.topic, args.partition)
        operator, held = pauses(cluster, args.topic, args.partition)
        if held:
            return _fail("trigger", f"cleaning of {tp} is paused ({pause_holders(operator, held)})"
                         ": nothing was triggered")
        try:
            explanation = cluster.explain(args.topic, args.partition)
        except UnknownTopicError:
            config = next(t.config for t in cluster.list_topics(include_internal=True)
                          if t.name == args.topic)
            if "compact" not in config.get("cleanup.policy", ""):
                # refused as explain, pause and resume refuse it: nothing here is the cleaner's
                raise UsageError(f"{args.topic} is not compacted (cleanup.policy="
                                 f"{config.get('cleanup.policy', 'delete')}): the cleaner "
                                 f"cleans compacted topics only, nothing was triggered for {tp}")
            explanation = None       # just created: the cleaner has not polled it yet
        if explanation is not None and not args.roll and not explanation.cleanable_bytes:
            reason = explanation.reason.removeprefix(f"{explanation.status.value}: ")
            return _nothing(args, f"{explanation.status.value}: {reason}")
        count = cluster.trigger_clean(args.topic, args.partition, roll=args.roll,
                                      wait=args.wait, timeout_s=args.timeout)
    except PartitionPausedError as err:
        return _fail("trigger", f"{err}: nothing was triggered")
    except TimeoutError as err:
        return _fail("trigger", str(err))
    finally:
        disconnect()
    document: dict[str, Any] = {"topic": args.topic, "partition": args.partition,
                                "triggered": True, "waited": args.wait,
                                "cleans_completed": count}
    if args.json:
        write(document)
    elif args.wait:
        print(f"{tp} cleaned ({count} cleans so far)")
    else:
        print(f"clean of {tp} triggered")
    return EXIT_OK


def _nothing(args: argparse.Namespace, reason: str) -> int:
    """A trigger with nothing to clean: said, not triggered."""
    if args.json:
        write({"topic": args.topic, "partition": args.partition, "triggered": False,
               "reason": reason})
    else:
        print(f"nothing to clean in {args.topic}-{args.partition}: {reason}")
    return EXIT_OK


def _fail(action: str, message: str) -> int:
    import sys

    print(f"strata cleaner {action}: {message}", file=sys.stderr)
    return EXIT_PROBLEMS


def run_pause(args: argparse.Namespace) -> int:
    from cluster.cleaning.pauses import pause_holders

    cluster = connect(args)
    try:
        check_partition(cluster, args.topic, args.partition)
        cluster.pause_cleaning(args.topic, args.partition)
        operator, held = pauses(cluster, args.topic, args.partition)
    finally:
        disconnect()
    if args.json:
        write({"topic": args.topic, "partition": args.partition, "paused": True,
               "operator_pauses": operator, "pauses": held})
    else:
        print(f"cleaning of {args.topic}-{args.partition} paused "
              f"({pause_holders(operator, held)})")
    return EXIT_OK


def run_resume(args: argparse.Namespace) -> int:
    from cluster.cleaning.pauses import pause_holders

    tp = f"{args.topic}-{args.partition}"
    cluster = connect(args)
    try:
        check_partition(cluster, args.topic, args.partition)
        resumed = cluster.resume_cleaning(args.topic, args.partition)
        operator, held = pauses(cluster, args.topic, args.partition)
    finally:
        disconnect()
    if args.json:
        write({"topic": args.topic, "partition": args.partition, "resumed": resumed,
               "paused": held > 0, "operator_pauses": operator, "pauses": held})
    elif not resumed:
        return _fail("resume", f"cleaning of {tp} was not paused by an operator"
                     + (f"; it is paused ({pause_holders(operator, held)})" if held else ""))
    elif held:
        print(f"one pause of {tp} released; still paused ({held} more pauses held: "
              f"{pause_holders(operator, held)})")
    else:
        print(f"cleaning of {tp} resumed")
    return EXIT_OK if resumed else EXIT_PROBLEMS
