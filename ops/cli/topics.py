"""``strata topic create|list|delete`` (and ``alter|describe|delete-records|offsets``, in
``ops.cli.topic_admin``): topics of a running cluster, with Kafka's topic keys as
overrides (``--config cleanup.policy=compact``). New partitions spread over the directories in
proportion to their room (``cluster.metadata.placement``)."""

from __future__ import annotations

import argparse
from typing import Any

from ops.cli import (add_common_args, connect, disconnect,
                               parse_config, partition_count, write)
from ops.cli.progress import run_with_progress
from ops.tools import EXIT_OK, UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "topic", help="create, list, alter, describe or delete topics; delete records; offsets",
        description="Create, list, alter, describe or delete the topics of a cluster, delete "
                    "records before an offset, list offsets by time.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic",
                                description="Create a topic; its partitions are spread over the "
                                            "log directories with the most room.")
    add_common_args(create)
    create.add_argument("topic", help="the new topic's name")
    create.add_argument("--partitions", type=partition_count, default=1,
                        help="how many partitions (default 1; at most 2147483647)")
    create.add_argument("--config", action="append", metavar="KEY=VALUE",
                        help="a topic override with Kafka's key (repeatable), "
                             "e.g. cleanup.policy=compact")
    create.set_defaults(handler=run_create)

    listing = actions.add_parser("list", help="list the topics",
                                 description="The topics, their partitions' directories and "
                                             "their overrides; internal topics (the cluster's "
                                             "own, such as __strata_transactions) are listed "
                                             "and marked, as kafka-topics --list does.")
    add_common_args(listing)
    listing.add_argument("--exclude-internal", action="store_true",
                         help="leave out internal topics (kafka-topics --exclude-internal)")
    listing.set_defaults(handler=run_list)

    delete = actions.add_parser("delete", help="delete a topic",
                                description="Delete every partition of a topic (Kafka's "
                                            "asynchronous delete: the files go after "
                                            "file.delete.delay.ms).")
    add_common_args(delete)
    delete.add_argument("topic", help="the topic to delete with all its data")
    delete.set_defaults(handler=run_delete)

    from ops.cli.topic_admin import register_actions

    register_actions(actions)


def run_create(args: argparse.Namespace) -> int:
    from cluster.errors import TopicExistsError
    from storage.errors import StorageError

    cluster = connect(args)
    try:
        config = parse_config(args.config)
        info = run_with_progress(
            cluster, args.topic, "create",
            lambda: cluster.create_topic(args.topic, args.partitions, config),
            enabled=not args.json and args.partitions >= PROGRESS_FROM)
    except TopicExistsError as err:
        raise UsageError(str(err)) from None
    except StorageError as err:   # an invalid name or setting
        raise UsageError(str(err)) from None
    finally:
        disconnect()
    if args.json:
        write(_topic(info))
    else:
        print(f"created topic {info.name} with {len(info.partitions)} partitions")
        if len(info.partitions) <= TABLE_UP_TO:
            _table([info])
        else:       # a row per directory, not 100,000 rows
            _per_dir(info)
    return EXIT_OK


def run_list(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        topics = cluster.list_topics(include_internal=not args.exclude_internal)
    finally:
        disconnect()
    if args.json:
        write({"topics": [_topic(t) for t in topics]})
    else:
        _table(topics)
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    from cluster.errors import UnknownTopicError

    cluster = connect(args)
    try:
        deleted = run_with_progress(cluster, args.topic, "delete",
                                    lambda: cluster.delete_topic(args.topic),
                                    enabled=not args.json)
    except UnknownTopicError as err:
        raise UsageError(str(err)) from None
    finally:
        disconnect()
    if args.json:
        write({"topic": args.topic, "partitions_deleted": deleted})
    else:
        print(f"deleted topic {args.topic} ({deleted} partitions)")
    return EXIT_OK


PROGRESS_FROM = 1000      # partitions: smaller creates end before a display would help
TABLE_UP_TO = 100         # partitions: a bigger topic is summed up per directory


def _per_dir(info: Any) -> None:
    from collections import Counter

    from ops.tools.output import console, print_table

    counts = Counter(info.partitions.values())
    print_table(console(), None, ["topic", "log dir", "partitions"],
                [(info.name, d, n) for d, n in sorted(counts.items())])


def _topic(info: Any) -> dict[str, Any]:
    return {"name": info.name, "partitions": {str(p): d for p, d in sorted(info.partitions.items())},
            "config": dict(info.config), "internal": info.internal}


def _table(topics: list[Any]) -> None:
    from ops.tools.output import console, print_table

    rows = [(t.name, p, d, "yes" if t.internal else None,
             ", ".join(f"{k}={v}" for k, v in sorted(t.config.items())) or None)
            for t in topics for p, d in sorted(t.partitions.items())]
    print_table(console(), None, ["topic", "partition", "log dir", "internal", "overrides"], rows,
                wrap=["overrides"])


