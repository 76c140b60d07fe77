"""``strata cluster start|status|stop``.

``start`` runs ``ray start --head`` (a Ray head in processes of its own, declaring one resource
per log directory and one for this host, dashboard on 127.0.0.1, metrics for Prometheus on
``--metrics-export-port``) unless ``--address`` names a Ray cluster to join; then it deploys the
detached actors and returns once every directory has loaded, with a progress bar fed by the load
progress of the directories. The cluster outlives the command.

``stop`` closes every directory cleanly (the next start recovers nothing), ends the actors, and
stops the Ray head when ``cluster start`` started it (only that head's processes: another Ray
cluster on the host keeps running).

``status`` exits 1 when a directory is offline or its node does not answer.

This module registers the three commands and runs ``status`` and ``stop``; ``start`` lives in
``ops.cli.cluster_start`` (imported when it runs).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ops.cli import (add_common_args, bytes_text, connect, dir_summary, dirs_need_attention,
                     disconnect, end_driver, jsonable, write)
from ops.tools import EXIT_OK, EXIT_PROBLEMS

DEFAULT_METRICS_PORT = 8080


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster", help="start, inspect or stop a Strata cluster on Ray",
        description="Start, inspect or stop a Strata cluster (node actors, coordinator, cleaners).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    start = actions.add_parser(
        "start", help="start a Ray head (or join one) and the Strata actors",
        description="Start a Ray head in processes of its own (or join --address), one node actor "
                    "per log directory, the coordinator and the cleaners; returns once every "
                    "directory has loaded. The cluster keeps running after the command.")
    add_common_args(start)
    start.add_argument("--log-dir", action="append", dest="log_dirs", metavar="DIR",
                       help="a log directory (repeat for several; default: log.dirs of --config)")
    start.add_argument("--cleaners", type=int, default=None,
                       help="cleaner actors per host (log.cleaner.threads)")
    start.add_argument("--config", metavar="FILE",
                       help="a server.properties file with Kafka broker keys; with listeners "
                            "(PLAINTEXT://host:port, or SSL, SASL_PLAINTEXT, SASL_SSL with "
                            "their ssl.* and sasl.* keys) every log directory is a Kafka "
                            "broker, the i-th on port + i")
    start.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="a broker key, overriding --config (repeatable)")
    start.add_argument("--dashboard-host", default="127.0.0.1",
                       help="address the Ray dashboard binds to (default 127.0.0.1)")
    start.add_argument("--dashboard-port", type=int, default=None,
                       help="port of the Ray dashboard (default 8265)")
    start.add_argument("--no-dashboard", action="store_true", help="run Ray without dashboard")
    start.add_argument("--port", type=int, default=None,
                       help="the Ray head's GCS port, the one --address names (default 6379)")
    start.add_argument("--metrics-export-port", type=int, default=DEFAULT_METRICS_PORT,
                       help="Prometheus endpoint port of the Ray head "
                            f"(default {DEFAULT_METRICS_PORT}); Ray listens on it on every "
                            "interface (0.0.0.0), it cannot bind it to loopback")
    start.add_argument("--ray-temp-dir", default=None, help="Ray's temp directory (--temp-dir)")
    start.add_argument("--num-cpus", type=int, default=None,
                       help="CPUs the Ray head offers to actors (default: every core)")
    start.add_argument("--ray-start-arg", action="append", default=[], metavar="ARG",
                       help="passed to `ray start` as is (repeatable), e.g. "
                            "--ray-start-arg=--ray-client-server-port=10101")
    start.add_argument("--timeout", type=float, default=600.0,
                       help="seconds to wait for the directories to load")
    start.add_argument("--allow-missing-log-dirs", action="store_true",
                       help="start even though log directories the cluster knows are not given "
                            "(refused otherwise); their partitions are unavailable, and no "
                            "partition is created until a start with every directory")
    start.set_defaults(handler=_run_start)

    status = actions.add_parser("status", help="directories and cleaners",
                                description="The directories (with the pid of the process "
                                            "serving each) and cleaners of a running cluster, "
                                            "its count of topics (`strata topic list` lists "
                                            "them) and its Kafka bootstrap servers (a cluster "
                                            "started with listeners); exits 1 when a directory "
                                            "is offline (`strata log-dirs restart DIR` brings "
                                            "it back once repaired) or skipped a partition "
                                            "when it loaded (listed; `strata log-dirs "
                                            "describe` has its files).")
    add_common_args(status)
    status.set_defaults(handler=run_status)

    stop = actions.add_parser(
        "stop", help="shut every directory down cleanly and stop the head",
        description="Close every directory cleanly, end the Strata actors and stop the Ray head "
                    "that `strata cluster start` started.")
    add_common_args(stop)
    stop.add_argument("--keep-head", action="store_true",
                      help="leave the Ray head running")
    stop.set_defaults(handler=run_stop)


def _run_start(args: argparse.Namespace) -> int:
    from ops.cli.cluster_start import run_start

    return run_start(args)


# ---- status --------------------------------------------------------------------------------------
def run_status(args: argparse.Namespace) -> int:
    cluster = connect(args)
    try:
        document = status_document(cluster)
    finally:
        cluster.close()
        disconnect()
    problems = dirs_need_attention(document["log_dirs"])
    if args.json:
        write(document)
        return EXIT_PROBLEMS if problems else EXIT_OK
    from ops.tools.output import console, markup_escape, print_table

    out = console()
    cleaner = document["cleaner"]
    out.print(f"Strata cluster [bold]{markup_escape(document['namespace'])}[/]: "
              f"{len(document['log_dirs'])} log directories, {len(document['topics'])} topics, "
              f"cleaner {'enabled' if cleaner['enabled'] else 'disabled'}")
    if document["bootstrap_servers"]:
        out.print(f"Kafka bootstrap servers ({document['security_protocol']}): "
                  f"{document['bootstrap_servers']}", highlight=False)
    print_table(out, "log directories",
                ["log dir", "host", "pid", "online", "partitions", "size", "free", "total",
                 "reason"],
                [(d["log_dir"], d["host"], d["pid"], d["online"], d["partitions"],
                  bytes_text(d["log_bytes"]),
                  bytes_text(d["free_bytes"]), bytes_text(d["total_bytes"]), d["offline_reason"])
                 for d in document["log_dirs"]], wrap=["reason"])
    skipped = [(s["partition"], d["log_dir"], f"{s['error']}: {s['reason']}")
               for d in document["log_dirs"] for s in d["skipped"]]
    if skipped:
        print_table(out, "partitions not loaded (`strata log-dirs describe` has their files)",
                    ["partition", "log dir", "problem"], skipped, wrap=["problem"])
    print_table(out, "partitions", ["partition", "log dir", "log start", "log end", "size"],
                [(f"{p['topic']}-{p['partition']}", p["log_dir"], p["log_start_offset"],
                  p["log_end_offset"], bytes_text(p["size_bytes"])) for p in document["partitions"]])
    print_table(out, "cleaners", ["cleaner", "name", "host", "state", "cleaning"],
                [(w["cleaner_id"], w["name"], w["host"], w["state"],
                  None if w["topic"] is None else f"{w['topic']}-{w['partition']}")
                 for w in cleaner["workers"]])
    out.print(f"cleans completed {cleaner['cleans_completed']}, failed "
              f"{cleaner['cleans_failed']}, max dirty {cleaner['max_dirty_percent']} %, "
              f"uncleanable partitions {cleaner['uncleanable']}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def status_document(cluster: Any) -> dict[str, Any]:
    description = cluster.description
    rows = cluster.stats()
    status = cluster.cleaner_status()
    topics = cluster.list_topics(include_internal=True)
    dirs = []
    for r in (r for r in rows if r["kind"] == "log_dir"):
        summary = dir_summary(r)
        summary["host"] = description.node_hosts.get(r["log_dir"], "")
        dirs.append(summary)
    return {
        "namespace": description.namespace, "head_started": description.head_started_by_strata,
        "bootstrap_servers": cluster.bootstrap_servers or None,
        "security_protocol": cluster.security_protocol,
        "log_dirs": dirs,
        "partitions": [{k: r[k] for k in ("topic", "partition", "log_dir", "log_start_offset",
                                          "log_end_offset", "size_bytes")}
                       for r in rows if r["kind"] == "partition"],
        "topics": [{"name": t.name, "partitions": len(t.partitions), "config": t.config,
                    "internal": t.internal} for t in topics],
        "cleaner": {
            "enabled": status.enabled, "workers": jsonable(status.workers),
            "cleans_completed": status.cleans_completed, "cleans_failed": status.cleans_failed,
            "max_dirty_percent": status.manager.max_dirty_percent,
            "uncleanable": len(status.uncleanable), "offline_dirs": status.offline_dirs,
            "loop_failures": status.loop_failures}}


# ---- stop ----------------------------------------------------------------------------------------
def run_stop(args: argparse.Namespace) -> int:
    from cluster.runtime import deploy
    from cluster.runtime.head import current_head, stop_head_process

    cluster = connect(args)
    description = cluster.description
    cluster.close()
    stopped, unclean = deploy.shutdown_report(args.namespace)
    head_processes = 0
    stop_head = description.head_started_by_strata and not args.keep_head
    if stop_head:
        session_dir, gcs_address = current_head()
        end_driver()
        head_processes = stop_head_process(session_dir, gcs_address)
    else:
        end_driver()
    document = {"namespace": args.namespace, "stopped": stopped is not None,
                "log_dirs": list(description.log_dirs), "head_stopped": stop_head,
                "head_processes": head_processes, "not_closed_cleanly": unclean}
    head_said = f"; Ray head stopped ({head_processes} processes)" if stop_head else ""
    if args.json:
        write(document)
    elif unclean:
        clean = len(description.log_dirs) - len(unclean)
        print(f"strata cluster: error: stopped Strata cluster {args.namespace}, but "
              + "; ".join(f"log directory {d} did not close cleanly: {why}"
                          for d, why in sorted(unclean.items()))
              + f" ({clean} of {len(description.log_dirs)} closed cleanly; the next start "
              f"recovers the others){head_said}", file=sys.stderr)
    else:
        print(f"stopped Strata cluster {args.namespace}: {len(description.log_dirs)} log "
              f"directories closed cleanly{head_said}")
    return EXIT_PROBLEMS if unclean else EXIT_OK
