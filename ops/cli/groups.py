"""``strata groups list|describe|reset-offsets|delete|delete-offsets``: the consumer groups of a
cluster, as ``kafka-consumer-groups`` shows and changes them, over the Kafka protocol
(``ops.tools.kafka_admin``), so it works against any broker that speaks it.

The brokers are ``--bootstrap-server`` (Kafka's flag), else those of the running Strata cluster
of ``--address``/``--namespace`` (its ``listeners``). ``--command-config`` (Kafka's flag) names
the client properties of a TLS or SASL listener (``ops.tools.client_security``). The tables
have kafka-consumer-groups' columns: ``describe`` GROUP, TOPIC, PARTITION, CURRENT-OFFSET,
LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID (``--members``: one row a member;
``--state``: the group's coordinator, assignor, state and member count); ``reset-offsets``
GROUP, TOPIC, PARTITION, NEW-OFFSET. As Kafka's tool: offsets are reset only while the group has no members (Empty or
Dead), without ``--execute`` the reset is a dry run, ``--to-offset`` and ``--shift-by`` are
clamped to each partition's log start and end, ``--shift-by`` needs a committed offset, and
``--to-datetime``/``--by-duration`` take the first offset at or after that time (the log end
when there is none).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ops.cli import DEFAULT_NAMESPACE, write
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError

if TYPE_CHECKING:
    from ops.tools.client_security import ClientSecurity
    from ops.tools.kafka_admin import GroupDescription, KafkaAdmin

MISSING = "-"          # kafka-consumer-groups' MISSING_COLUMN_VALUE
INACTIVE_STATES = ("Empty", "Dead")
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
DURATION = re.compile(r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?"
                      r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "groups", help="list, describe, reset the offsets of, or delete consumer groups",
        description="The consumer groups of a cluster, as kafka-consumer-groups shows and "
                    "changes them, over the Kafka protocol.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list the groups",
                                 description="Every group of every broker.")
    _common(listing)
    listing.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                         help="print each group's state too; with STATES (comma-separated, "
                              f"of {', '.join(STATES)}) only groups in them")
    listing.set_defaults(handler=run_list)

    describe = actions.add_parser(
        "describe", help="a group's offsets and lag, members or state",
        description="A group's committed offsets, log end offsets and lag per partition, with "
                    "the member each partition is assigned to (default), its members "
                    "(--members), or its state (--state).")
    _common(describe)
    describe.add_argument("group", nargs="+", help="the group(s)")
    shown = describe.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true", help="offsets and lag (the default)")
    shown.add_argument("--members", action="store_true", help="one row a member")
    shown.add_argument("--state", action="store_true", help="the group's state")
    describe.add_argument("--verbose", action="store_true",
                          help="with --members: each member's assigned partitions")
    describe.set_defaults(handler=run_describe)

    reset = actions.add_parser(
        "reset-offsets", help="move a group's committed offsets",
        description="Set the committed offsets of an inactive group (no members): a dry run "
                    "unless --execute.")
    _common(reset)
    reset.add_argument("group", help="the group")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions (repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every topic the group has committed offsets for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="each partition's log start")
    to.add_argument("--to-latest", action="store_true", help="each partition's log end")
    to.add_argument("--to-current", action="store_true",
                    help="the committed offset (the log end where there is none)")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N, clamped to the log")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offset plus N (may be negative), clamped to the log")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="the first offset at or after that time (UTC unless the text gives "
                         "an offset such as +02:00)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS",
                    help="the first offset at or after now minus the ISO-8601 duration")
    run = reset.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(handler=run_reset)

    delete = actions.add_parser("delete", help="delete groups",
                                description="Delete groups that have no members, with their "
                                            "committed offsets.")
    _common(delete)
    delete.add_argument("group", nargs="+", help="the group(s)")
    delete.set_defaults(handler=run_delete)

    delete_offsets = actions.add_parser(
        "delete-offsets", help="delete a group's offsets of some topics",
        description="Delete a group's committed offsets of topics it does not consume.")
    _common(delete_offsets)
    delete_offsets.add_argument("group", help="the group")
    delete_offsets.add_argument("--topic", action="append", required=True,
                                metavar="TOPIC[:P,P...]", help="a topic or some of its "
                                                               "partitions (repeatable)")
    delete_offsets.set_defaults(handler=run_delete_offsets)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,...]",
                        help="the brokers to ask (default: the listeners of the running cluster "
                             "of --address/--namespace)")
    parser.add_argument("--address", default=None,
                        help="Ray address of the cluster, when no --bootstrap-server is given")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                        help=f"the Strata cluster's Ray namespace (default {DEFAULT_NAMESPACE})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties for a TLS or SASL listener, as Kafka's tools "
                             "take them (security.protocol, ssl.truststore.location, "
                             "sasl.mechanism, sasl.jaas.config, ...)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for a broker or a coordinator (default 30)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document instead of tables")


def admin(args: argparse.Namespace) -> KafkaAdmin:
    """The admin client of ``--bootstrap-server``, else of the running cluster's brokers."""
    from ops.tools.kafka_admin import KafkaAdmin

    servers = args.bootstrap_server
    if not servers:
        from ops.cli import connect, disconnect

        cluster = connect(args)
        try:
            servers = cluster.bootstrap_servers
        finally:
            disconnect()
        if not servers:
            raise UsageError(f"the cluster of namespace {args.namespace} has no Kafka listener "
                             "(start it with listeners=... in --config), or give "
                             "--bootstrap-server")
    security = _security(args.command_config)
    try:
        return KafkaAdmin(servers, timeout_s=args.timeout, security=security)
    except ValueError as err:
        raise UsageError(f"--bootstrap-server: {err}") from None


def _security(path: str | None) -> ClientSecurity | None:
    """The connection settings of ``--command-config``; a file that cannot be read, or a
    setting refused, is a usage error naming the file and the key."""
    if path is None:
        return None
    from cluster.config import properties_lines
    from ops.tools.client_security import ClientSecurity
    from storage.errors import InvalidConfigError

    try:
        properties = {key: value for _, key, value in properties_lines(path, known=bool)}
        return ClientSecurity.from_properties(properties)
    except OSError as err:
        raise UsageError(f"--command-config {path}: {err.strerror or err}") from None
    except InvalidConfigError as err:
        raise UsageError(f"--command-config {path}: {err}") from None


def _run(args: argparse.Namespace, body: Any) -> int:
    from ops.tools.kafka_admin import KafkaAdminError

    with admin(args) as client:
        try:
            return body(client)
        except KafkaAdminError as err:
            hint = ""
            if args.command_config is None and err.closed_by_broker:
                hint = ("\n(a TLS or SASL listener closes a plaintext connection: give its "
                        "client properties with --command-config FILE)")
            print(f"strata groups: error: {err}{hint}", file=sys.stderr)
            return EXIT_PROBLEMS


# ---- list ---------------------------------------------------------------------------------------

def run_list(args: argparse.Namespace) -> int:
    states = _states(args.state)

    def body(client: KafkaAdmin) -> int:
        groups = client.list_groups(states)
        if args.json:
            write({"groups": [{"group": g.group_id, "state": g.state,
                               "protocol_type": g.protocol_type} for g in groups]})
        elif args.state is None:
            for g in groups:
                print(g.group_id)
        else:
            _table(("GROUP", "STATE"), [(g.group_id, g.state) for g in groups])
        return EXIT_OK

    return _run(args, body)


def _states(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    by_lower = {s.lower(): s for s in STATES}
    states = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part.lower() not in by_lower:
            raise UsageError(f"--state: {part!r} is not one of {', '.join(STATES)}")
        states.append(by_lower[part.lower()])
    return tuple(states)


# ---- describe -----------------------------------------------------------------------------------

def run_describe(args: argparse.Namespace) -> int:
    def body(client: KafkaAdmin) -> int:
        documents, problems = [], False
        for group_id in args.group:
            group = client.describe_group(group_id)
            if args.state:
                documents.append(_state_row(group))
                continue
            if group.state == "Dead":
                print(f"\nConsumer group '{group_id}' does not exist.", file=sys.stderr)
                problems = True
                continue
            if args.members:
                documents.append(_members(group, args.verbose))
            else:
                documents.append(_offsets(client, group))
        if args.json:
            write({"groups": documents})
            return EXIT_PROBLEMS if problems else EXIT_OK
        for document in documents:
            _print_describe(document, args)
        return EXIT_PROBLEMS if problems else EXIT_OK

    return _run(args, body)


def _state_row(group: GroupDescription) -> dict[str, Any]:
    node_id, host, port = group.coordinator
    return {"group": group.group_id, "coordinator": f"{host}:{port} ({node_id})",
            "assignment_strategy": group.protocol, "state": group.state,
            "members": len(group.members)}


def _members(group: GroupDescription, verbose: bool) -> dict[str, Any]:
    rows = []
    for m in group.members:
        assigned = assigned_partitions(m.assignment) if group.protocol_type == "consumer" else []
        row = {"consumer_id": m.member_id, "group_instance_id": m.group_instance_id,
               "host": m.client_host, "client_id": m.client_id, "partitions": len(assigned)}
        if verbose:
            row["assignment"] = _assignment_text(assigned)
        rows.append(row)
    return {"group": group.group_id, "state": group.state, "members": rows}


def _offsets(client: KafkaAdmin, group: GroupDescription) -> dict[str, Any]:
    """Kafka's collectGroupOffsets: every partition a member is assigned (with its committed
    offset, or none), then every committed partition no member holds, with ``-`` for the
    member columns; lag = log end - committed."""
    committed = client.committed_offsets(group.group_id)
    owners: dict[tuple[str, int], Any] = {}
    if group.protocol_type == "consumer":
        for m in group.members:
            for tp in assigned_partitions(m.assignment):
                owners[tp] = m
    partitions = sorted(set(owners) | set(committed))
    ends = client.end_offsets(partitions) if partitions else {}
    rows = []
    for topic, partition in partitions:
        offset = committed.get((topic, partition))
        end = ends.get((topic, partition))
        member = owners.get((topic, partition))
        rows.append({
            "topic": topic, "partition": partition, "current_offset": offset,
            "log_end_offset": end,
            "lag": None if offset is None or end is None else max(end - offset, 0),
            "consumer_id": member.member_id if member else None,
            "host": member.client_host if member else None,
            "client_id": member.client_id if member else None})
    return {"group": group.group_id, "state": group.state, "has_members": bool(group.members),
            "partitions": rows}


def _print_describe(document: dict[str, Any], args: argparse.Namespace) -> None:
    if args.state:
        _table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
               [(document["group"], document["coordinator"], document["assignment_strategy"],
                 document["state"], document["members"])])
        return
    group = document["group"]
    if args.members:
        if not document["members"]:
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
            return
        header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                  "#PARTITIONS"] + (["ASSIGNMENT"] if args.verbose else [])
        _table(header, [[group, m["consumer_id"], m["group_instance_id"] or MISSING, m["host"],
                         m["client_id"], m["partitions"]]
                        + ([m["assignment"]] if args.verbose else [])
                        for m in document["members"]])
        return
    if not document["has_members"]:
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    if document["state"] in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    _table(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID"),
           [(group, r["topic"], r["partition"], _cell(r["current_offset"]),
             _cell(r["log_end_offset"]), _cell(r["lag"]), _cell(r["consumer_id"]),
             _cell(r["host"]), _cell(r["client_id"])) for r in document["partitions"]])


def assigned_partitions(raw: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer member's assignment (Kafka's ConsumerProtocolAssignment,
    ``ops.tools.group_records``); [] when it is empty or does not read."""
    from ops.tools.group_records import ASSIGNMENT
    from ops.tools.kafka_messages import INT16, MessageReadError, Reader, read_message

    if len(raw) < 2:
        return []
    try:
        reader = Reader(raw)
        version = reader.fixed(INT16)
        message = read_message(ASSIGNMENT, raw[reader.pos:], version)
    except MessageReadError:
        return []
    return sorted((entry["topic"], p) for entry in message.get("assignedPartitions") or ()
                  for p in entry["partitions"])


def _assignment_text(partitions: Sequence[tuple[str, int]]) -> str:
    """Kafka's ASSIGNMENT column: ``topic(0,1),other(2)``, ``-`` when none."""
    if not partitions:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))


# ---- reset-offsets ------------------------------------------------------------------------------

def run_reset(args: argparse.Namespace) -> int:
    timestamp = _reset_timestamp(args)

    def body(client: KafkaAdmin) -> int:
        group = client.describe_group(args.group)
        if group.state not in INACTIVE_STATES:
            print(f"\nError: Assignments can only be reset if the group '{args.group}' is "
                  f"inactive, but the current state is {group.state}.", file=sys.stderr)
            return EXIT_PROBLEMS
        committed = client.committed_offsets(args.group)
        partitions = (sorted(committed) if args.all_topics
                      else _scoped_partitions(client, args.topic))
        plan = _plan(client, args, partitions, committed, timestamp)
        if args.execute and plan:
            client.commit_offsets(args.group, plan)
        elif not args.execute and not args.dry_run and not args.json:
            print("WARN: No action will be performed as the --execute option is missing. "
                  "Add --execute to commit the new offsets, or --dry-run to only print "
                  "them.", file=sys.stderr)
        if args.json:
            write({"group": args.group, "executed": bool(args.execute), "offsets": [
                {"topic": t, "partition": p, "new_offset": o} for (t, p), o in
                sorted(plan.items())]})
        else:
            _table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                   [(args.group, t, p, o) for (t, p), o in sorted(plan.items())])
        return EXIT_OK

    return _run(args, body)


def _reset_timestamp(args: argparse.Namespace) -> int | None:
    """The time ``--to-datetime``/``--by-duration`` name, in epoch ms; None for the others."""
    if args.to_datetime is not None:
        text = args.to_datetime
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise UsageError(f"--to-datetime: {text!r} is not YYYY-MM-DDTHH:mm:SS.sss "
                             "(optionally with an offset such as +02:00)") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.timezone.utc)
        return int(moment.timestamp() * 1000)
    if args.by_duration is not None:
        match = DURATION.match(args.by_duration)
        if match is None or not any(match.groupdict().values()):
            raise UsageError(f"--by-duration: {args.by_duration!r} is not an ISO-8601 "
                             "duration such as PT1H30M or P1DT12H")
        parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
        seconds = parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
        now = datetime.datetime.now(datetime.timezone.utc).timestamp()
        return int((now - seconds) * 1000)
    return None


def _scoped_partitions(client: KafkaAdmin, topics: Iterable[str]) -> list[tuple[str, int]]:
    """``--topic`` values: ``orders`` (every partition) or ``orders:0,2``."""
    whole, chosen = [], set()
    for text in topics:
        name, sep, numbers = text.partition(":")
        if not name:
            raise UsageError(f"--topic {text!r}: no topic name")
        if not sep:
            whole.append(name)
            continue
        try:
            chosen.update((name, int(n)) for n in numbers.split(",") if n.strip())
        except ValueError:
            raise UsageError(f"--topic {text!r}: partitions are numbers, e.g. "
                             f"{name}:0,1") from None
    if whole:
        chosen.update(client.topic_partitions(whole))
    return sorted(chosen)


def _plan(client: KafkaAdmin, args: argparse.Namespace, partitions: list[tuple[str, int]],
          committed: dict[tuple[str, int], int], timestamp: int | None
          ) -> dict[tuple[str, int], int]:
    from ops.tools.kafka_admin import EARLIEST, LATEST

    if not partitions:
        return {}
    if args.to_earliest:
        return client.end_offsets(partitions, EARLIEST)
    if args.to_latest:
        return client.end_offsets(partitions, LATEST)
    if timestamp is not None:
        return client.end_offsets(partitions, timestamp)
    if args.to_current:
        without = [tp for tp in partitions if tp not in committed]
        ends = client.end_offsets(without, LATEST) if without else {}
        return {tp: committed[tp] if tp in committed else ends[tp] for tp in partitions}
    if args.shift_by is not None:
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            topic, partition = missing[0]
            raise UsageError(f"cannot shift the offset of {topic}-{partition}: the group has "
                             "no committed offset for it")
        wanted = {tp: committed[tp] + args.shift_by for tp in partitions}
    else:
        wanted = {tp: args.to_offset for tp in partitions}
    starts = client.end_offsets(partitions, EARLIEST)
    ends = client.end_offsets(partitions, LATEST)
    return {tp: min(max(offset, starts[tp]), ends[tp]) for tp, offset in wanted.items()}


# ---- delete -------------------------------------------------------------------------------------

def run_delete(args: argparse.Namespace) -> int:
    def body(client: KafkaAdmin) -> int:
        results = client.delete_groups(args.group)
        deleted = [g for g in args.group if results.get(g) is not None and results[g] == 0]
        failed = {g: results.get(g) for g in args.group if g not in deleted}
        if args.json:
            write({"deleted": deleted, "failed": {g: _error_name(e) for g, e in failed.items()}})
        else:
            if deleted and not failed:
                print("Deletion of requested consumer groups ("
                      + ", ".join(f"'{g}'" for g in deleted) + ") was successful.")
            if failed:
                print("Deletion of some consumer groups failed:")
                for g, error in failed.items():
                    print(f"* Group '{g}' could not be deleted due to: {_error_name(error)}")
                if deleted:
                    print("\nThese consumer groups were deleted successfully: "
                          + ", ".join(f"'{g}'" for g in deleted))
        return EXIT_PROBLEMS if failed else EXIT_OK

    return _run(args, body)


def run_delete_offsets(args: argparse.Namespace) -> int:
    def body(client: KafkaAdmin) -> int:
        partitions = _scoped_partitions(client, args.topic)
        error, results = client.delete_offsets(args.group, partitions)
        if args.json:
            write({"group": args.group, "error": _error_name(error), "partitions": [
                {"topic": t, "partition": p, "error": _error_name(e)}
                for (t, p), e in sorted(results.items())]})
        elif error != 0:
            print(f"\nError: Encounter some unknown error: {_error_name(error)}"
                  if error.name != "group_id_not_found" else
                  f"\nError: '{args.group}' does not exist.", file=sys.stderr)
        else:
            _table(("TOPIC", "PARTITION", "STATUS"),
                   [(t, p, "Successful" if e == 0 else f"Error: {_error_name(e)}")
                    for (t, p), e in sorted(results.items())])
        failed = error != 0 or any(e != 0 for e in results.values())
        return EXIT_PROBLEMS if failed else EXIT_OK

    return _run(args, body)


# ---- output -------------------------------------------------------------------------------------

def _error_name(code: Any) -> str | None:
    """Kafka's name of an error code (``NON_EMPTY_GROUP``); None for none."""
    if code is None:
        return "UNKNOWN"
    return None if code == 0 else code.name.upper()


def _cell(value: Any) -> str:
    return MISSING if value is None else str(value)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Left-aligned columns as wide as their widest cell, one space apart (the shape of
    kafka-consumer-groups' printf tables)."""
    lines = [list(map(str, header))] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print()
    for line in lines:
        print(" ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
