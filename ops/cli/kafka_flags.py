"""The options of Kafka's command-line tools (``kafka-console-consumer``, ``kafka-console-producer``,
``kafka-topics``, ``kafka-configs``, ``kafka-log-dirs``) that Strata's commands do not take, each
with what to use instead. ``ops.cli.main`` adds the hint to the "unrecognized arguments" line of
the sub-command a user typed one into. Plain data: importing it costs nothing.
"""

from __future__ import annotations

CONNECTION = ("strata reaches the cluster through Ray, not a broker address: use --address (the "
              "Ray address `strata cluster start` printed; default RAY_ADDRESS, else the Ray "
              "cluster on this host) and --namespace")
TOPIC_ARGUMENT = "the topic is the first argument (e.g. `strata {command} orders`)"

# (the sub-command, or "*" for every one) -> flag -> what to use instead
HINTS: dict[str, dict[str, str]] = {
    "*": {
        "--bootstrap-server": CONNECTION,
        "--broker-list": CONNECTION,
        "--zookeeper": CONNECTION,
        "--command-config": CONNECTION,
    },
    "consume": {
        "--group": "strata consume joins no consumer group (Kafka clients get groups from the "
                   "cluster's brokers): read a partition from an offset with --partition and "
                   "--from-offset (or --from-timestamp)",
        "--consumer-property": "Strata has no consumer settings: see `strata consume --help`",
        "--consumer.config": "Strata has no consumer settings: see `strata consume --help`",
        "--from-beginning": "consume reads from the log start by default (--from-offset 0); "
                            "--follow keeps reading new records",
        "--topic": TOPIC_ARGUMENT,
        "--isolation-level": "consume reads what the log holds up to its end (read_uncommitted); "
                             "the Spark source reads read_committed",
        "--property": "print.offset is --print-offsets, key.separator is --separator, "
                      "null.literal is --null-marker; print.value only is --value-only",
        "--timeout-ms": "consume ends at the log end by itself; --follow with --max-messages "
                        "waits for new records",
    },
    "produce": {
        "--topic": TOPIC_ARGUMENT,
        "--property": "keys are read by default (key<TAB>value; parse.key=false is --value-only, "
                      "key.separator is --separator, null.marker is --null-marker)",
        "--producer-property": "Strata has no producer settings: see `strata produce --help` "
                               "(--flush waits for the disk, --batch-bytes sizes batches)",
        "--producer.config": "Strata has no producer settings: see `strata produce --help`",
        "--request-required-acks": "Strata keeps one copy: an append is acknowledged once the "
                                   "log holds it, and on disk with --flush",
        "--sync": "every produce waits for its acknowledgements; --flush also for the disk",
    },
    "topic": {
        "--topic": TOPIC_ARGUMENT.replace("{command}", "topic describe"),
        "--create": "use `strata topic create NAME`",
        "--describe": "use `strata topic describe [NAME]`",
        "--list": "use `strata topic list`",
        "--delete": "use `strata topic delete NAME`",
        "--alter": "use `strata topic alter NAME`",
        "--replication-factor": "Strata keeps one copy of each partition (no replication): "
                                "leave it out",
        "--replica-assignment": "partitions are placed by free bytes; move one with `strata "
                                "log-dirs reassign`",
        "--add-config": "use `strata topic alter NAME --config KEY=VALUE`",
        "--entity-type": "use `strata topic alter NAME --config KEY=VALUE` for a topic's "
                         "settings (brokers take --set at `strata cluster start`)",
    },
    "log-dirs": {
        "--describe": "use `strata log-dirs describe`",
        "--broker-list": "one host is broker 0; `strata log-dirs describe` lists every one",
    },
}


def hint(command: str, flag: str) -> str | None:
    """What to use instead of Kafka's ``flag`` (``--group`` or ``--group=g1``) in ``strata
    command``, or None when it is no Kafka flag we know."""
    name = flag.split("=", 1)[0]
    found = HINTS.get(command, {}).get(name) or HINTS["*"].get(name)
    return None if found is None else found.replace("{command}", command)
