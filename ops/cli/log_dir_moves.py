"""``strata log-dirs reassign | drain | rebalance``: moving partitions between the log
directories of a running cluster (``Cluster.move_partition``, KIP-113).

* ``reassign --reassignment-json-file plan.json`` takes Kafka's reassignment document
  (``kafka-reassign-partitions --reassignment-json-file``)::

      {"version": 1, "partitions": [{"topic": "orders", "partition": 3, "replicas": [0],
                                     "log_dirs": ["/d3"]}]}

  ``log_dirs`` goes with ``replicas`` entry by entry; ``"any"`` (Kafka's "wherever the broker
  likes") leaves that partition where it is. Brokers are numbered as ``log-dirs describe``
  numbers them (one per host, in host order); each partition has one replica, on the broker of
  its host.
* ``drain DIR`` moves every partition off ``DIR`` (before a disk swap), each to the directory
  that placement would choose for a new partition (``cluster.metadata.placement.place``) among the
  others.
* ``rebalance`` evens out the bytes held: while moving the largest partition that fits from
  the fullest directory to the emptiest narrows the gap between them, plan that move. A dry run
  by default: it prints the plan; ``--execute`` carries it out.

Each move is printed as it completes (``--json``: one document with every move). A plan that
cannot be read or names something the cluster does not have is refused before anything moves,
with one line on stderr (exit 2); a move refused or abandoned by the cluster stops the run with
one line (exit 1), the moves before it done.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.cli import add_common_args, connect, disconnect, write
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError

ANY_DIR = "any"


@dataclass(frozen=True)
class PlannedMove:
    topic: str
    partition: int
    source_dir: str
    target_dir: str
    size_bytes: int = 0


def register_actions(actions: argparse._SubParsersAction) -> None:
    """Add ``reassign``, ``drain`` and ``rebalance`` to ``strata log-dirs``."""
    reassign = actions.add_parser(
        "reassign", help="move partitions to the log directories a Kafka reassignment JSON names",
        description="Kafka's kafka-reassign-partitions --reassignment-json-file with its "
                    "log_dirs field: move each listed partition to its directory while it "
                    "serves.")
    add_common_args(reassign, json_help="print the moves as one JSON document")
    reassign.add_argument("--reassignment-json-file", required=True, metavar="FILE",
                          help="Kafka's reassignment JSON (version 1, partitions with "
                               "topic, partition, replicas and log_dirs)")
    reassign.set_defaults(handler=run_reassign)
    drain = actions.add_parser(
        "drain", help="move every partition off a log directory (before a disk swap)",
        description="Move every partition of DIR to the other directories, spread as "
                    "placement spreads new partitions.")
    add_common_args(drain, json_help="print the moves as one JSON document")
    drain.add_argument("log_dir", metavar="DIR", help="the log directory to empty")
    drain.set_defaults(handler=run_drain)
    rebalance = actions.add_parser(
        "rebalance", help="even out the bytes held by the log directories (dry run by default)",
        description="Plan moves that narrow the gap between the fullest and the emptiest "
                    "directory; print the plan, or carry it out with --execute.")
    add_common_args(rebalance, json_help="print the plan (and moves) as one JSON document")
    rebalance.add_argument("--execute", action="store_true",
                           help="carry the plan out (default: only print it)")
    rebalance.set_defaults(handler=run_rebalance)


# ---- plans (pure: tested without a cluster) ---------------------------------------------------
def reassignment_entries(text: str, source: str) -> list[Any]:
    """The ``partitions`` of a reassignment document, checked for form only (before the
    cluster is asked anything)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{source}: not JSON ({err.msg} at line {err.lineno} column "
                         f"{err.colno})") from None
    if not isinstance(document, dict) or document.get("version") != 1:
        raise UsageError(f"{source}: expected Kafka's reassignment document with \"version\": 1")
    entries = document.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{source}: \"partitions\" must be a non-empty list")
    return entries


def parse_reassignment(text: str, source: str, routes: dict[str, dict[int, str]],
                       hosts: dict[str, str]) -> list[PlannedMove]:
    """The moves a reassignment document asks for. ``routes`` is where every partition is,
    ``hosts`` the host of every directory. ``UsageError`` naming ``source`` and the entry for a
    document that does not parse, a version other than 1, an unknown topic, partition or
    directory, a broker other than the partition's, or replicas and log_dirs that do not pair."""
    entries = reassignment_entries(text, source)
    broker_of = {h: i for i, h in enumerate(sorted(set(hosts.values())))}
    moves: list[PlannedMove] = []
    seen: set[tuple[str, int]] = set()
    for n, entry in enumerate(entries):
        where = f"{source}: partitions[{n}]"
        if not isinstance(entry, dict):
            raise UsageError(f"{where} is not an object")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or not isinstance(partition, int) \
                or isinstance(partition, bool):
            raise UsageError(f"{where}: needs \"topic\" (a string) and \"partition\" (a number)")
        if topic not in routes or partition not in routes[topic]:
            raise UsageError(f"{where}: the cluster has no partition {topic}-{partition}")
        if (topic, partition) in seen:
            raise UsageError(f"{where}: {topic}-{partition} is listed twice")
        seen.add((topic, partition))
        replicas, log_dirs = entry.get("replicas"), entry.get("log_dirs")
        if not isinstance(log_dirs, list) or not log_dirs:
            raise UsageError(f"{where}: {topic}-{partition} has no \"log_dirs\" (a list of "
                             "directories, one per replica, or \"any\")")
        current = routes[topic][partition]
        broker = broker_of.get(hosts.get(current, ""), 0)
        if replicas is None:
            replicas = [broker] * len(log_dirs)
        if not isinstance(replicas, list) or len(replicas) != len(log_dirs):
            raise UsageError(f"{where}: \"replicas\" and \"log_dirs\" of {topic}-{partition} "
                             "must have one entry each per replica")
        if replicas != [broker]:
            raise UsageError(f"{where}: {topic}-{partition} has one replica, on broker "
                             f"{broker}; replicas {replicas} cannot be assigned here")
        target = log_dirs[0]
        if target == ANY_DIR:
            continue
        known = {str(Path(d)) for d in hosts}
        if not isinstance(target, str) or str(Path(target)) not in known:
            raise UsageError(f"{where}: {target!r} is not a log directory of the cluster "
                             f"({', '.join(sorted(known))})")
        if str(Path(target)) != str(Path(current)):
            moves.append(PlannedMove(topic, partition, current, str(Path(target))))
    return moves


def plan_drain(log_dir: str, partitions: list[tuple[str, int, int]],
               rooms: list[Any]) -> list[PlannedMove]:
    """Moves of every ``(topic, partition, size)`` of ``log_dir`` to the other online
    directories of ``rooms`` (``cluster.metadata.placement.DirRoom``), chosen as placement chooses,
    largest partition first. ``UsageError`` when no other directory is online."""
    from cluster.metadata.placement import DirRoom, place

    others = [r for r in rooms if r.log_dir != log_dir and r.online]
    if not others and partitions:
        raise UsageError(f"no other online log directory to drain {log_dir} into")
    moves = []
    held = {r.log_dir: r for r in others}
    for topic, partition, size in sorted(partitions, key=lambda p: (-p[2], p[0], p[1])):
        [target] = place(list(held.values()), 1)
        moves.append(PlannedMove(topic, partition, log_dir, target, size))
        r = held[target]
        held[target] = DirRoom(r.log_dir, r.free_bytes - size, r.log_bytes + size,
                               r.partitions + 1, r.online, r.total_bytes, r.file_system)
    return moves


def plan_rebalance(sizes: dict[str, list[tuple[str, int, int]]]) -> list[PlannedMove]:
    """Greedy evening-out of ``{dir: [(topic, partition, size)]}`` (online directories only):
    move the largest partition of the fullest directory that is smaller than the gap to the
    emptiest one, as long as one exists. Every planned move narrows the gap, so it ends."""
    held = {d: list(parts) for d, parts in sizes.items()}
    moves: list[PlannedMove] = []
    while len(held) > 1:
        used = {d: sum(p[2] for p in parts) for d, parts in held.items()}
        full = max(used, key=lambda d: (used[d], d))
        empty = min(used, key=lambda d: (used[d], d))
        gap = used[full] - used[empty]
        fits = [p for p in held[full] if 0 < p[2] < gap]
        if not fits:
            break
        chosen = max(fits, key=lambda p: (p[2], p[0], -p[1]))
        held[full].remove(chosen)
        held[empty].append(chosen)
        moves.append(PlannedMove(chosen[0], chosen[1], full, empty, chosen[2]))
    return moves


# ---- running ----------------------------------------------------------------------------------
def run_reassign(args: argparse.Namespace) -> int:
    path = Path(args.reassignment_json_file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read {path}: {getattr(err, 'strerror', None) or err}"
                         ) from None
    reassignment_entries(text, str(path))
    cluster = connect(args)
    try:
        routes = {t.name: dict(t.partitions) for t in cluster.list_topics(include_internal=True)}
        moves = parse_reassignment(text, str(path), routes, cluster.description.node_hosts)
        return _execute(cluster, moves, args.json)
    finally:
        disconnect()


def run_drain(args: argparse.Namespace) -> int:
    from cluster.naming import abs_dir

    cluster = connect(args)
    try:
        log_dir = abs_dir(args.log_dir)
        if log_dir not in {abs_dir(d) for d in cluster.description.log_dirs}:
            raise UsageError(f"{args.log_dir} is not a log directory of the cluster "
                             f"({', '.join(sorted(cluster.description.log_dirs))})")
        rows = cluster.stats()
        parts = [(r["topic"], r["partition"], r["size_bytes"]) for r in rows
                 if r["kind"] == "partition" and r["log_dir"] == log_dir]
        moves = plan_drain(log_dir, parts, rooms_of(rows))
        return _execute(cluster, moves, args.json)
    finally:
        disconnect()


def run_rebalance(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        rows = cluster.stats()
        online = {r["log_dir"] for r in rows if r["kind"] == "log_dir" and r.get("online")}
        sizes: dict[str, list[tuple[str, int, int]]] = {d: [] for d in online}
        for r in rows:
            if r["kind"] == "partition" and r["log_dir"] in online:
                sizes[r["log_dir"]].append((r["topic"], r["partition"], r["size_bytes"]))
        moves = plan_rebalance(sizes)
        if not args.execute:
            _show_plan(moves, sizes, args.json)
            return EXIT_OK
        return _execute(cluster, moves, args.json)
    finally:
        disconnect()


def rooms_of(rows: list[dict[str, Any]]) -> list[Any]:
    from cluster.metadata.placement import DirRoom

    return [DirRoom(r["log_dir"], r.get("disk_free_bytes", 0), r.get("log_bytes", 0),
                    r.get("partitions", 0), bool(r.get("online")),
                    total_bytes=r.get("disk_total_bytes", 0), file_system=r.get("file_system", ""))
            for r in rows if r["kind"] == "log_dir"]


def _show_plan(moves: list[PlannedMove], sizes: dict[str, list[tuple[str, int, int]]],
               as_json: bool) -> None:
    from ops.tools.output import console, human_bytes, print_table

    if as_json:
        write({"dryRun": True, "moves": [m.__dict__ for m in moves]})
        return
    out = console()
    if not moves:
        out.print("the directories are as even as single moves can make them: nothing to do")
        return
    used = {d: sum(p[2] for p in parts) for d, parts in sizes.items()}
    print_table(out, "rebalance plan (dry run: --execute carries it out)",
                ["partition", "from", "to", "size"],
                [(f"{m.topic}-{m.partition}", m.source_dir, m.target_dir,
                  human_bytes(m.size_bytes)) for m in moves])
    after = dict(used)
    for m in moves:
        after[m.source_dir] -= m.size_bytes
        after[m.target_dir] += m.size_bytes
    print_table(out, "bytes held", ["log dir", "now", "after"],
                [(d, human_bytes(used[d]), human_bytes(after[d])) for d in sorted(used)])


def _execute(cluster: Any, moves: list[PlannedMove], as_json: bool) -> int:
    from node.errors import MoveAbortedError, MoveRefusedError
    from storage.errors import LogDirOfflineError

    done: list[dict[str, Any]] = []
    failure: str | None = None
    for m in moves:
        try:
            result = cluster.move_partition(m.topic, m.partition, m.target_dir)
        except (MoveRefusedError, MoveAbortedError, LogDirOfflineError) as err:
            failure = f"move of {m.topic}-{m.partition} to {m.target_dir} failed: {err}"
            break
        entry = {"partition": f"{m.topic}-{m.partition}", "from": m.source_dir,
                 "to": m.target_dir, "logEndOffset": result.log_end_offset,
                 "bytesCopied": result.bytes_copied, "switchMs": round(result.held_ms, 1),
                 "elapsedMs": round(result.elapsed_ms, 1)}
        done.append(entry)
        if not as_json:
            print(f"moved {entry['partition']} from {m.source_dir} to {m.target_dir}: "
                  f"{result.bytes_copied} bytes, appends held {result.held_ms:.1f} ms",
                  flush=True)
    if as_json:
        write({"moves": done, "error": failure})
    elif not moves:
        print("nothing to move")
    if failure is not None:
        import sys

        print(f"strata log-dirs: error: {failure}", file=sys.stderr)
        return EXIT_PROBLEMS
    return EXIT_OK
