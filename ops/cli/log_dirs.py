"""``strata log-dirs describe``: Kafka's ``kafka-log-dirs.sh --describe``; ``strata log-dirs
restart DIR``: restart the node of one directory (``Cluster.restart_node``), how an offline
directory comes back once its disk is repaired (Kafka would restart the whole broker).

``--json`` prints Kafka's document, one broker per host (numbered in host order; one host is
broker 0)::

    {"version":1,"brokers":[{"broker":0,"logDirs":[{"logDir":"/data/d0","error":null,
      "totalBytes":..,"usableBytes":..,"partitions":[{"partition":"orders-0","size":..,
      "offsetLag":0,"isFuture":false,"dirtyRatio":0.42}]}]}]}

``totalBytes``/``usableBytes`` are the file system's (as in Kafka 3.3+, KIP-827); ``dirtyRatio``
is ours (the share of a compacted log not cleaned yet; 0 for other logs), and so are
``logStartOffset``, ``logEndOffset`` and ``lastStableOffset`` (present only while an open
transaction holds it below the log end). An offline directory has Kafka's
``KafkaStorageException`` as ``error``, no partitions, and ``offlineReason`` saying what failed.
Ours too: ``problems`` lists the partitions the directory skipped when it was opened
(``{"partition","error","path","reason","action"}``: an entry the loader cannot use, a typed load
error) and ``quarantined`` the files its recovery moved to a partition's ``quarantine/`` folder
(``{"path","original","position","bytes","reason"}``). Without ``--json``: a table of
directories, one of partitions, and one of problems and quarantined files when there are any.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from ops.cli import add_common_args, connect, disconnect, write
from ops.cli.log_dir_moves import register_actions
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError

STORAGE_ERROR = "org.apache.kafka.common.errors.KafkaStorageException"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("log-dirs",
                                   help="describe the log directories, move partitions "
                                        "between them",
                                   description="Kafka's kafka-log-dirs.sh for a Strata cluster.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe", help="directories, their partitions, sizes, free bytes and dirty ratios",
        description="Every log directory with its partitions (size, dirty ratio), and the "
                    "total and usable bytes of its file system. --json prints Kafka's document.")
    add_common_args(describe, json_help="print Kafka's JSON document")
    describe.add_argument("--topic-list", default=None,
                          help="comma-separated topics to show (default: all)")
    describe.set_defaults(handler=run)
    restart = actions.add_parser(
        "restart", help="restart the node of one directory (bring an offline one back)",
        description="Restart the node actor of DIR: it closes the directory (cleanly when it is "
                    "online), its process ends, Ray starts it again and it loads DIR (an offline "
                    "directory is recovered from its recovery points, as after a crash). The "
                    "other directories keep serving. Exits 1 when DIR, or one of its "
                    "partitions, is still offline after the restart (the fault is still "
                    "there), or when its Kafka broker cannot listen again (a port taken, a "
                    "TLS key store it cannot read).")
    add_common_args(restart)
    restart.add_argument("log_dir", metavar="DIR", help="the log directory whose node restarts")
    restart.add_argument("--timeout", type=float, default=300.0,
                         help="seconds to wait for the directory to load again (default 300)")
    restart.set_defaults(handler=run_restart)
    register_actions(actions)


def run(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        rows = cluster.stats()
        hosts = cluster.description.node_hosts
        moves = [dataclasses.asdict(m) for m in cluster.move_status()]
    finally:
        disconnect()
    topics = None if not args.topic_list else {t.strip() for t in args.topic_list.split(",")
                                                if t.strip()}
    document = describe(rows, hosts, topics, moves)
    if args.json:
        write(document)
    else:
        _print(document)
    return EXIT_OK


def run_restart(args: argparse.Namespace) -> int:
    from cluster.errors import NodeRestartError, UnknownLogDirError

    cluster = connect(args)
    try:
        try:
            done = cluster.restart_node(args.log_dir, timeout_s=args.timeout)
        except UnknownLogDirError as err:
            raise UsageError(str(err)) from None
        except NodeRestartError as err:
            print(f"strata log-dirs: error: {err}", file=sys.stderr)
            return EXIT_PROBLEMS
    finally:
        cluster.close()
        disconnect()
    if args.json:
        write(done)
    how = ("closed cleanly, nothing to recover" if done.closed_cleanly else
           f"recovered {done.recovered_segments} segments, truncated {done.truncated_bytes} bytes")
    if not done.online:
        print(f"strata log-dirs: error: restarted the node of {done.log_dir} (pid "
              f"{done.old_pid} -> {done.new_pid}), but it is still offline: "
              f"{done.offline_reason}", file=sys.stderr)
        return EXIT_PROBLEMS
    if done.not_loaded:
        print(f"strata log-dirs: error: restarted the node of {done.log_dir} (pid "
              f"{done.old_pid} -> {done.new_pid}), but it did not load "
              f"{len(done.not_loaded)} partitions (still offline): "
              + "; ".join(done.not_loaded), file=sys.stderr)
        return EXIT_PROBLEMS
    if done.kafka_error is not None:
        print(f"strata log-dirs: error: restarted the node of {done.log_dir} (pid "
              f"{done.old_pid} -> {done.new_pid}), online with {done.partitions} partitions, "
              f"but its Kafka broker does not listen: {done.kafka_error}", file=sys.stderr)
        return EXIT_PROBLEMS
    if not args.json:
        broker = f"; Kafka broker at {done.kafka_broker}" if done.kafka_broker else ""
        print(f"restarted the node of {done.log_dir}: pid {done.old_pid} -> {done.new_pid}; "
              f"online, {done.partitions} partitions ({how}){broker} in {done.elapsed_s:.1f} s")
    return EXIT_OK


def describe(rows: list[dict[str, Any]], hosts: dict[str, str],
             topics: set[str] | None = None,
             moves: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Kafka's log-dirs document from ``Cluster.stats()`` rows and the host of every
    directory. ``moves`` (``Cluster.move_status()`` as dicts) add the future logs of moves in
    progress to their target directory, as Kafka lists a future replica: ``isFuture`` true,
    ``offsetLag`` how far the copy is behind the source, ``size`` the bytes copied so far."""
    host_ids = {h: i for i, h in enumerate(sorted(set(hosts.values())))}
    partitions: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] == "partition" and (topics is None or r["topic"] in topics):
            entry = {"partition": f"{r['topic']}-{r['partition']}", "size": r["size_bytes"],
                     "offsetLag": 0, "isFuture": False, "dirtyRatio": round(r["dirty_ratio"], 6),
                     "logStartOffset": r["log_start_offset"], "logEndOffset": r["log_end_offset"]}
            stable, end = r.get("last_stable_offset"), r.get("log_end_offset")
            if stable is not None and end is not None and stable < end:
                entry["lastStableOffset"] = stable      # an open transaction holds it back
            partitions.setdefault(r["log_dir"], []).append(entry)
    for m in moves or ():
        if topics is None or m["topic"] in topics:
            partitions.setdefault(m["target_dir"], []).append(
                {"partition": f"{m['topic']}-{m['partition']}", "size": m["bytes_copied"],
                 "offsetLag": m["offset_lag"], "isFuture": True, "dirtyRatio": 0.0,
                 "logStartOffset": None, "logEndOffset": m["copied_log_end_offset"],
                 "sourceDir": m["source_dir"]})
    brokers: dict[int, list[dict[str, Any]]] = {}
    for r in sorted((r for r in rows if r["kind"] == "log_dir"), key=lambda r: r["log_dir"]):
        online = bool(r.get("online"))
        entry = {"logDir": r["log_dir"], "error": None if online else STORAGE_ERROR,
                 "partitions": sorted(partitions.get(r["log_dir"], []),
                                      key=lambda p: _order(p["partition"])),
                 "totalBytes": r.get("disk_total_bytes", -1),
                 "usableBytes": r.get("disk_free_bytes", -1),
                 "problems": [{"partition": p["name"], "error": p["error"], "path": p["path"],
                               "reason": p["reason"], "action": p["action"]}
                              for p in r.get("problems") or ()],
                 "quarantined": [dict(q) for q in r.get("quarantined") or ()]}
        if not online:
            entry["offlineReason"] = r.get("offline_reason")
        brokers.setdefault(host_ids.get(hosts.get(r["log_dir"], ""), 0), []).append(entry)
    return {"version": 1, "brokers": [{"broker": b, "logDirs": dirs}
                                      for b, dirs in sorted(brokers.items())]}


def _order(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition("-")
    return topic, int(partition)


def _print(document: dict[str, Any]) -> None:
    from ops.tools.output import console, human_bytes, print_table

    out = console()
    dirs = [(b["broker"], d) for b in document["brokers"] for d in b["logDirs"]]
    print_table(out, "log directories",
                ["broker", "log dir", "error", "partitions", "size", "usable", "total"],
                [(broker, d["logDir"], d.get("offlineReason") or d["error"],
                  len(d["partitions"]), human_bytes(sum(p["size"] for p in d["partitions"])),
                  human_bytes(d["usableBytes"]), human_bytes(d["totalBytes"]))
                 for broker, d in dirs], wrap=["error"])
    print_table(out, "partitions",
                ["partition", "log dir", "log start", "log end", "size", "dirty ratio"],
                [(p["partition"], d["logDir"], p["logStartOffset"], p["logEndOffset"],
                  human_bytes(p["size"]), f"{p['dirtyRatio']:.3f}")
                 for _, d in dirs for p in d["partitions"] if not p["isFuture"]])
    futures = [(p["partition"], d["logDir"], p["sourceDir"], "true", p["offsetLag"],
                human_bytes(p["size"])) for _, d in dirs for p in d["partitions"] if p["isFuture"]]
    if futures:
        print_table(out, "moves in progress (future logs)",
                    ["partition", "log dir", "from", "isFuture", "offsetLag", "copied"], futures)
    problems = [(p["partition"], d["logDir"], p["action"], f"{p['error']}: {p['reason']}")
                for _, d in dirs for p in d.get("problems", [])]
    if problems:
        print_table(out, "partitions not loaded", ["partition", "log dir", "action", "problem"],
                    problems, wrap=["problem"])
    kept = [(q["path"], q["original"], q["position"], human_bytes(q["bytes"]), q["reason"])
            for _, d in dirs for q in d.get("quarantined", [])]
    if kept:
        print_table(out, "quarantined by recovery",
                    ["file", "from", "position", "size", "reason"], kept, wrap=["reason"])
