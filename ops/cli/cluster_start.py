"""``strata cluster start``: check the log directories (a file, one that cannot be created, one
another cluster serves: refused with one line), start a Ray head in processes of its own unless
``--address`` names one to join, deploy the actors and wait until every directory has loaded
(a progress bar on a terminal, a line every 10 s otherwise), then print the directories, the
Kafka bootstrap servers (``listeners`` in ``--config``/``--set``) and the metrics endpoint; the
command's Ray driver ends with its process, without Ray's teardown (``ops.cli.leave_driver``).
A start that fails half way is undone (actors ended, a head it started stopped). Registered by
``ops.cli.lifecycle``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from ops.cli import (RAY_DEFERRABLE, bytes_text, defer_imports, dir_summary, end_driver,
                     lean_serialization, leave_driver, parse_config, ray_messages_to_stderr, write)
from ops.tools import EXIT_OK, EXIT_PROBLEMS, UsageError


def run_start(args: argparse.Namespace) -> int:
    from cluster.config import BrokerConfig, read_server_properties
    from cluster.naming import abs_dir
    from storage.errors import InvalidConfigError

    properties: dict[str, Any] = {}
    if args.config:
        try:
            properties.update(read_server_properties(args.config))
        except OSError as err:
            raise UsageError(f"cannot read {args.config}: {err.strerror or err}") from None
        except InvalidConfigError as err:
            raise UsageError(str(err)) from None
    properties.update(parse_config(args.set))
    if args.cleaners is not None:
        if args.cleaners < 1:
            raise UsageError("--cleaners must be at least 1")
        properties["log.cleaner.threads"] = str(args.cleaners)
    try:
        broker = BrokerConfig.from_properties(properties)
    except InvalidConfigError as err:
        raise UsageError(str(err)) from None
    dirs = [abs_dir(d) for d in (args.log_dirs or broker.log_dirs)]
    if not dirs:
        raise UsageError("no log directory: give --log-dir, or log.dirs in --config")
    _check_listeners(broker.properties, len(dirs))
    new_dirs = check_log_dirs(dirs, joining=args.address is not None)

    began = time.monotonic()
    head = None
    address = args.address
    if address is None:
        imports = _import_driver_code()
        try:
            head = _start_head(args, dirs)
        finally:
            imports.join()
        address = head.address
    else:
        _refuse_running(address, args.namespace)
    from storage.errors import StorageError

    try:
        cluster = _deploy(args, dirs, properties, address, head is not None)
    except (StorageError, TimeoutError) as err:     # a directory that cannot even be asked
        _abandon(args.namespace, head)
        print(f"strata cluster: error: the cluster did not start: {err} (nothing was left "
              "running)", file=sys.stderr)
        return EXIT_PROBLEMS
    except BaseException:
        if head is not None:
            _stop_started_head(head)
        raise
    loaded = time.monotonic() - began
    rows = [r for r in cluster.stats() if r["kind"] == "log_dir"]
    offline = [r for r in rows if not r.get("online")]
    if offline:
        return _undo_start(cluster, head, offline)
    document = {
        "address": address, "namespace": cluster.namespace, "head_started": head is not None,
        "dashboard": None if args.no_dashboard or head is None
        else f"http://{args.dashboard_host}:{args.dashboard_port or 8265}",
        "metrics_export_port": args.metrics_export_port if head is not None else None,
        "metrics_listen": None if head is None else metrics_listen(args.metrics_export_port),
        "log_dirs": [{**dir_summary(r), "new": r["log_dir"] in new_dirs} for r in rows],
        "cleaners": len(cluster.description.workers), "seconds": round(loaded, 3),
        "bootstrap_servers": cluster.bootstrap_servers or None,
        "security_protocol": cluster.security_protocol}
    cluster.close()
    leave_driver()
    if args.json:
        write(document)
        return EXIT_OK
    from ops.tools.output import console, markup_escape, print_table

    out = console()
    out.print(f"Strata cluster [bold]{markup_escape(cluster.namespace)}[/] on Ray at "
              f"{markup_escape(str(address))}: "
              f"{len(rows)} log directories, {document['cleaners']} cleaners, "
              f"serving after {loaded:.1f} s")
    print_table(out, None, ["log dir", "online", "partitions", "size", "free", "recovered"],
                [(r["log_dir"], r.get("online"), r.get("partitions"),
                  bytes_text(r.get("log_bytes")), bytes_text(r.get("disk_free_bytes")),
                  _recovered(r, new_dirs))
                 for r in rows])
    if document["bootstrap_servers"]:
        out.print(f"Kafka bootstrap servers ({document['security_protocol']}): "
                  f"{document['bootstrap_servers']}", highlight=False)
    if document["dashboard"]:
        out.print(f"dashboard: {document['dashboard']}")
    if document["metrics_listen"]:
        out.print(f"Prometheus metrics: http://127.0.0.1:{args.metrics_export_port}/metrics "
                  f"(Ray listens on every interface, {document['metrics_listen']}: firewall the "
                  "port, or keep the host off untrusted networks)", highlight=False)
    return EXIT_OK


def _check_listeners(properties: Any, count: int) -> None:
    """Refuse, before any Ray process starts, Kafka listener settings that no directory could
    use (``cluster.kafka.listeners``: a malformed listener, a port pushed past 65535)."""
    from cluster.kafka.listeners import directory_properties, serves_kafka
    from storage.errors import InvalidConfigError

    if not serves_kafka(properties):
        return
    try:
        for index in range(count):
            directory_properties(properties, index)
    except InvalidConfigError as err:
        raise UsageError(str(err)) from None


def check_log_dirs(dirs: list[str], *, joining: bool) -> set[str]:
    """Refuse, before any Ray process or actor exists, a directory given twice (``d`` and
    ``d/`` are one), one that is no directory or cannot be created, and one whose ``.lock`` is
    held (a Strata cluster serves it already). When ``joining`` a Ray cluster, a directory that
    does not exist here may be another host's: it is left to its node. Returns the directories
    that are new (absent or empty before this call)."""
    import os

    from node.errors import InvalidLogDirError, LogDirLockedError
    from node.lock import DirLock

    seen: dict[str, str] = {}
    for d in dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise UsageError(f"log directory {d} is given twice"
                             + (f" (as {seen[real]})" if seen[real] != d else ""))
        seen[real] = d
    new: set[str] = set()
    for d in dirs:
        if joining and not os.path.lexists(d):
            continue
        if not os.path.lexists(d) or (os.path.isdir(d) and not os.listdir(d)):
            new.add(d)
        try:
            os.makedirs(d, exist_ok=True)
        except FileExistsError:
            raise UsageError(f"log directory {d} cannot be used: it exists and is not a "
                             "directory") from None
        except OSError as err:
            raise UsageError(f"log directory {d} cannot be created: "
                             f"{err.strerror or err}") from None
        try:
            DirLock.acquire(Path(d)).release()
        except LogDirLockedError as err:
            raise UsageError(_in_use(d, err.fields.get("pid"))) from None
        except InvalidLogDirError as err:
            raise UsageError(str(err)) from None
    return new


def _refuse_running(address: str, namespace: str) -> None:
    """``UsageError`` when the Ray cluster at ``address`` already runs a Strata cluster in
    ``namespace``: deploying again would start node actors its coordinator does not know and
    report cleaners it does not have."""
    from cluster.errors import ActorUnavailableError
    from cluster.handles import lookup
    from cluster.runtime.head import init_ray
    from cluster.naming import COORDINATOR_NAME

    try:
        init_ray(address)
    except ConnectionError as err:
        raise UsageError(f"no Ray cluster at {address}: {err}") from None
    try:
        description = lookup(COORDINATOR_NAME, namespace).call("describe", timeout=60)
    except ActorUnavailableError:
        return
    end_driver()
    raise UsageError(f"a Strata cluster already runs in namespace {namespace} on the Ray cluster "
                     f"at {address} (log directories {', '.join(description.log_dirs)}, "
                     f"{len(description.workers)} cleaners); see `strata cluster status`, stop "
                     "it first, or start another with --namespace")


def _in_use(log_dir: str, pid: Any) -> str:
    """The refusal of a directory whose lock is held, naming the Strata cluster (namespace and
    Ray address) when the holder is a Ray worker of this host."""
    namespace, address = _holder_cluster(log_dir, pid)
    if namespace is not None:
        return (f"a Strata cluster already serves {log_dir} (namespace {namespace}, Ray at "
                f"{address}); use `strata cluster status|stop --address {address} --namespace "
                f"{namespace}`, or another directory")
    holder = f"process {pid}" if pid else "another process"
    return (f"log directory {log_dir} is in use: {holder} holds its .lock (a Strata cluster "
            "already serves it?); stop that owner or use another directory")


def _holder_cluster(log_dir: str, pid: Any) -> tuple[str | None, str | None]:
    """(namespace, Ray address) of the node actor in process ``pid`` that serves ``log_dir``,
    or (None, None): the Ray address comes from the command line of the worker or of its raylet
    (a Ray worker renames its own), the namespace from the named actors of that Ray cluster."""
    address = None
    try:
        import psutil

        proc = psutil.Process(int(pid))
        for p in [proc, *proc.parents()]:
            address = next((a.split("=", 1)[1] for a in p.cmdline()
                            if a.startswith(("--gcs-address=", "--gcs_server_address="))), None)
            if address:
                break
    except Exception:  # noqa: BLE001 - no such process, no permission: name the pid only
        return None, None
    if address is None:
        return None, None
    import ray

    from cluster.runtime.head import init_ray
    from cluster.naming import node_actor_name

    try:
        init_ray(address)
        named = ray.util.list_named_actors(all_namespaces=True)
    except Exception:  # noqa: BLE001 - that Ray cluster does not answer: name the address
        return None, None
    finally:
        end_driver()
    wanted = node_actor_name(log_dir)
    found = [a["namespace"] for a in named if a.get("name") == wanted]
    return (found[0], address) if found else (None, None)


def _recovered(row: dict[str, Any], new_dirs: set[str]) -> str:
    """The ``recovered`` cell of ``cluster start``: a brand-new directory had nothing to
    recover."""
    if row["log_dir"] in new_dirs and not row.get("partitions"):
        return "new"
    return "no (clean shutdown)" if row.get("had_clean_shutdown") else "yes"


def metrics_listen(port: int) -> str:
    """Where the head's Prometheus endpoint listens: Ray's metrics agent binds every interface,
    so that is what is printed. Checked in Ray 2.60's source: the reporter agent
    (``ray/dashboard/modules/reporter/reporter_agent.py``) starts its Prometheus exporter with
    ``address=get_localhost_ip() if is_localhost(self._ip) else ""``, i.e. loopback only when the
    node's IP is a loopback address, and ``ray start`` passes ``--node-ip-address`` through
    ``services.resolve_ip_for_localhost``, which turns 127.0.0.1, localhost and ::1 into the
    host's routable address; there is no option for the exporter's bind address. So Strata cannot
    make it listen on loopback only: firewall the port, or keep the host off untrusted
    networks (ops/README.md says so)."""
    return f"0.0.0.0:{port}"


def _undo_start(cluster: Any, head: Any, offline: list[dict[str, Any]]) -> int:
    """A start whose directories did not all load: stop what it started (actors, and the head
    when it started one) and say in one line which directories failed and why."""
    cluster.close()
    _abandon(cluster.namespace, head)
    why = "; ".join(f"log directory {r['log_dir']} did not load: "
                    f"{r.get('offline_reason') or 'no reason given'}" for r in offline)
    print(f"strata cluster: error: {why} (nothing was left running)", file=sys.stderr)
    return EXIT_PROBLEMS


def _abandon(namespace: str, head: Any) -> None:
    """Undo a failed start: stop the head it started (its actors die with it), or else end the
    actors it deployed on the Ray cluster it joined (their failures to close are expected)."""
    import logging

    from cluster.runtime import deploy

    if head is not None:
        _stop_started_head(head)
        return
    deploy_logger = logging.getLogger(deploy.__name__)
    level = deploy_logger.level
    deploy_logger.setLevel(logging.CRITICAL)
    try:
        deploy.shutdown(namespace)
    except Exception:  # noqa: BLE001 - best effort: the start has failed already
        pass
    finally:
        deploy_logger.setLevel(level)
        end_driver()


def _import_driver_code() -> threading.Thread:
    """Import, on a thread the caller joins, what this command's Ray driver needs once the head
    is up (ray, the client, the deploy code, the progress bar: a second of CPU), while ``ray
    start`` brings the head up in processes of its own and this one only waits. An import that
    fails here fails again, with its error, where the start needs the module."""
    if "ray" not in sys.modules:
        defer_imports(RAY_DEFERRABLE)

    def run() -> None:
        try:
            for name in ("ray", "cluster.client.client", "cluster.runtime.attach",
                         "cluster.runtime.deploy", "ops.tools.output"):
                importlib.import_module(name)
        except Exception:  # noqa: BLE001 - imported again, and raised, where it is used
            pass

    thread = threading.Thread(target=run, name="strata-start-imports", daemon=True)
    thread.start()
    return thread


def _start_head(args: argparse.Namespace, dirs: list[str]) -> Any:
    from cluster.runtime.head import start_head_process

    if not args.json:
        print("starting a Ray head ...", file=sys.stderr, flush=True)
    try:
        return start_head_process(
            dirs, dashboard_host=args.dashboard_host, include_dashboard=not args.no_dashboard,
            dashboard_port=args.dashboard_port, metrics_export_port=args.metrics_export_port,
            port=args.port, temp_dir=args.ray_temp_dir, num_cpus=args.num_cpus,
            extra_args=args.ray_start_arg)
    except RuntimeError as err:
        raise UsageError(f"{err}\n(is a Ray cluster running already? join it with --address)") \
            from None


def _deploy(args: argparse.Namespace, dirs: list[str], properties: dict[str, Any],
            address: str, head_started: bool) -> Any:
    import ray

    from cluster.client.client import Cluster

    if not ray.is_initialized():   # this command's own driver; one already running keeps its own
        lean_serialization()
    ray_messages_to_stderr()
    with load_progress_bar(enabled=not args.json) as on_progress:
        return Cluster.start(log_dirs=dirs, config=properties, address=address,
                             namespace=args.namespace, timeout_s=args.timeout,
                             on_progress=on_progress, head_started_by_strata=head_started,
                             allow_missing_log_dirs=args.allow_missing_log_dirs)


def _stop_started_head(head: Any) -> None:
    from cluster.runtime.head import head_session_dir, stop_head_process

    end_driver()
    stop_head_process(head.session_dir or head_session_dir(head.temp_dir), head.address)


@contextmanager
def load_progress_bar(*, enabled: bool = True) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A callback for ``Cluster.start(on_progress=...)`` that drives a rich bar of segments
    loaded (on stderr, when it is a terminal)."""
    from ops.tools.output import console

    err = console(stderr=True)
    if not enabled:
        yield lambda progress: None
        return
    if not err.is_terminal:
        yield _load_lines()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
        TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=err, transient=False)
    task = bar.add_task("loading log directories", total=None)

    def update(progress: dict[str, Any]) -> None:
        known = [p for p in progress.values() if p is not None]
        total = sum(p.total_segments for p in known)
        done = sum(p.total_segments - p.remaining_segments for p in known)
        ready = sum(1 for p in known if p.done)
        bar.update(task, total=max(total, 1), completed=done if total else int(ready == len(
            progress)), description=f"loading log directories ({ready}/{len(progress)} done)")

    with bar:
        yield update


def _load_lines(every_s: float = 10.0) -> Callable[[dict[str, Any]], None]:
    """The progress of ``cluster start`` when stderr is no terminal: a line when a directory has
    loaded, and one every ``every_s`` seconds while any is still loading."""
    said: set[str] = set()
    last = [time.monotonic()]

    def update(progress: dict[str, Any]) -> None:
        for log_dir, p in sorted(progress.items()):
            if p is not None and p.done and log_dir not in said:
                said.add(log_dir)
                print(f"loaded log directory {log_dir} ({p.total_logs} partitions, "
                      f"{p.total_segments} segments)", file=sys.stderr, flush=True)
        if len(said) < len(progress) and time.monotonic() - last[0] >= every_s:
            last[0] = time.monotonic()
            known = [p for p in progress.values() if p is not None]
            total = sum(p.total_segments for p in known)
            done = sum(p.total_segments - p.remaining_segments for p in known)
            print(f"loading log directories: {len(said)} of {len(progress)} loaded, "
                  f"{done} of {total} segments", file=sys.stderr, flush=True)
    return update
