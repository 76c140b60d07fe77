"""``strata stats``: the cluster's statistics now, or (``--plot DIR``) PNG plots of a run.

``StatsSampler`` takes a sample of ``Cluster.stats()`` every ``interval`` seconds on a thread of
its own (drills run one and keep the samples in their report). A sample is plain JSON::

    {"t": 1.5,                                   seconds since sampling started
     "log_dirs": {dir: {"log_bytes", "online", "free_bytes"}},   (those that answered)
     "partitions": {"topic-p": {"size_bytes", "dirty_ratio", "log_dir"}},
     "cleans": [{"cleaner_id", "topic", "partition", "bytes_read", "elapsed_secs",
                 "finished_ms", "outcome"}]}     cleans finished since the previous sample

``plot_samples`` draws three PNGs (matplotlib, Agg backend: no display needed):
``dirty_ratio.png`` (per compacted partition), ``cleaner_throughput.png`` (MB/s of every finished
clean, by cleaner) and ``log_sizes.png`` (bytes per directory, stacked).

``strata stats --plot DIR`` samples a running cluster for ``--seconds`` every ``--interval``, or
plots the samples a drill recorded (``--from-report FILE``).
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

PLOTS = ("dirty_ratio.png", "cleaner_throughput.png", "log_sizes.png")


def sample(cluster: Any, t: float, seen: set[tuple[int, int, str]],
           timeout_s: float = 2.0, since_ms: int | None = None) -> dict[str, Any]:
    """One sample of ``cluster`` (``seen`` keeps the cleans already reported; cleans that
    finished before ``since_ms``, the wall clock when sampling started, are not). Every actor gets
    ``timeout_s`` to answer: a directory or coordinator that is down or restarting is left out of
    this sample rather than stalling the next ones."""
    from cluster.handles import lookup
    from cluster.naming import COORDINATOR_NAME

    log_dirs: dict[str, Any] = {}
    partitions: dict[str, Any] = {}
    asked = {}
    for log_dir in cluster.description.log_dirs:
        try:
            asked[log_dir] = cluster.node(log_dir).submit("stats")
        except Exception:  # noqa: BLE001 - see the docstring
            continue
    for log_dir, pending in asked.items():
        try:
            stats = pending.result(timeout_s)
        except Exception:  # noqa: BLE001 - see the docstring
            continue
        log_dirs[log_dir] = {"log_bytes": stats.log_bytes, "online": bool(stats.online),
                             "free_bytes": stats.disk_free_bytes}
        for p in stats.partitions:
            partitions[f"{p.topic}-{p.partition}"] = {
                "size_bytes": p.size_bytes, "dirty_ratio": p.dirty_ratio,
                "compacted": "compact" in p.cleanup_policy, "log_dir": log_dir}
    cleans = []
    try:
        recent = lookup(COORDINATOR_NAME, cluster.namespace).submit("status").result(
            timeout_s).recent
    except Exception:  # noqa: BLE001 - the coordinator restarting: no cleans this sample
        recent = ()
    cleans = new_cleans(recent, seen, since_ms)
    return {"t": round(t, 3), "log_dirs": log_dirs, "partitions": partitions, "cleans": cleans}


def new_cleans(recent: Sequence[Any], seen: set[tuple[int, int, str]],
               since_ms: int | None) -> list[dict[str, Any]]:
    """The cleans of ``recent`` (the coordinator's ``CleanSummary`` list) not in ``seen`` (which
    they join) that finished at or after ``since_ms``; each with ``t``, its finish in seconds
    since ``since_ms``. The coordinator keeps the last cleans of its whole life: those from before
    sampling started are not the run's."""
    cleans = []
    for s in recent:
        key = (s.finished_ms, s.cleaner_id, f"{s.topic}-{s.partition}")
        if key in seen:
            continue
        seen.add(key)
        if since_ms is not None and s.finished_ms < since_ms:
            continue
        cleans.append({"cleaner_id": s.cleaner_id, "topic": s.topic, "partition": s.partition,
                       "bytes_read": s.bytes_read, "elapsed_secs": s.elapsed_secs,
                       "finished_ms": s.finished_ms, "outcome": s.outcome,
                       "t": None if since_ms is None else round((s.finished_ms - since_ms) / 1000,
                                                                 3)})
    return cleans


class StatsSampler:
    """Samples on its own thread until ``stop`` (owned by whoever starts it; a failing sample is
    logged and skipped: a node or the coordinator may be down during a drill)."""

    def __init__(self, cluster: Callable[[], Any], interval_s: float = 1.0) -> None:
        self._cluster = cluster
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self.failures = 0
        self._seen: set[tuple[int, int, str]] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.begin()

    def begin(self) -> None:
        """Sampling starts now: sample times count from here, earlier cleans are left out."""
        self._t0 = time.monotonic()
        self._since_ms = int(time.time() * 1000)

    def start(self) -> None:
        self.begin()
        self._thread = threading.Thread(target=self._run, name="stats-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def take(self) -> None:
        try:
            self.samples.append(sample(self._cluster(), time.monotonic() - self._t0, self._seen,
                                       since_ms=self._since_ms))
        except Exception:  # noqa: BLE001 - see the class docstring
            self.failures += 1
            logger.debug("stats sample failed", exc_info=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            # a call to an actor killed under load can hang past its timeout: such a sample is
            # given up (its thread ends on its own) and the next one goes ahead
            worker = threading.Thread(target=self.take, name="stats-sample", daemon=True)
            worker.start()
            worker.join(self.interval_s + 5.0)
            if worker.is_alive():
                self.failures += 1
            self._stop.wait(self.interval_s)


def plot_samples(samples: Sequence[dict[str, Any]], out_dir: Path,
                 title: str = "Strata") -> list[Path]:
    """Write the three PNGs into ``out_dir``; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / name for name in PLOTS]
    times = [s["t"] for s in samples]

    fig, ax = plt.subplots(figsize=(9, 4.5))
    names = sorted({p for s in samples for p, v in s["partitions"].items() if v["compacted"]})
    for name in names:
        ax.plot(times, [s["partitions"].get(name, {}).get("dirty_ratio", float("nan"))
                        for s in samples], label=name, linewidth=1.4)
    ax.set(title=f"{title}: dirty ratio of compacted partitions", xlabel="seconds",
           ylabel="dirty bytes / log bytes", ylim=(0, 1.05))
    _finish(ax, fig, paths[0], bool(names), "no compacted partitions")

    fig, ax = plt.subplots(figsize=(9, 4.5))
    cleans = [c for s in samples for c in s["cleans"] if c["outcome"] == "cleaned"]
    start_ms = min((c["finished_ms"] for c in cleans), default=0)
    t_first = next((s["t"] for s in samples if s["cleans"]), 0.0)
    for cleaner in sorted({c["cleaner_id"] for c in cleans}):
        mine = [c for c in cleans if c["cleaner_id"] == cleaner]
        ax.scatter([c["t"] if c.get("t") is not None
                    else t_first + (c["finished_ms"] - start_ms) / 1000 for c in mine],
                   [c["bytes_read"] / max(c["elapsed_secs"], 1e-3) / 1e6 for c in mine],
                   label=f"cleaner {cleaner}", s=18)
    ax.set(title=f"{title}: cleaner throughput (each finished clean)", xlabel="seconds",
           ylabel="MB/s read")
    _finish(ax, fig, paths[1], bool(cleans), "no clean finished during the run")

    fig, ax = plt.subplots(figsize=(9, 4.5))
    dirs = sorted({d for s in samples for d in s["log_dirs"]})
    if dirs:
        ax.stackplot(times, [[s["log_dirs"].get(d, {}).get("log_bytes", 0) / 1e6
                              for s in samples] for d in dirs], labels=dirs, alpha=0.8)
        label = "a directory offline"
        for i, s in enumerate(samples):
            if any(not v["online"] for v in s["log_dirs"].values()):
                ax.axvspan(times[max(i - 1, 0)], times[min(i + 1, len(times) - 1)],
                           color="red", alpha=0.12, label=label, linewidth=0)
                label = "_nolegend_"
    ax.set(title=f"{title}: log bytes per directory", xlabel="seconds", ylabel="MB")
    _finish(ax, fig, paths[2], bool(dirs), "no directories sampled")
    plt.close("all")
    return paths


def _finish(ax: Any, fig: Any, path: Path, has_data: bool, empty: str) -> None:
    if has_data:
        ax.legend(loc="upper left", fontsize=7, ncol=2)
    else:
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# ---- the command -------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "stats", help="statistics of a running cluster, or PNG plots of them over a run",
        description="Print one snapshot of every directory, partition and cleaner; with --plot, "
                    "sample for --seconds (or read the samples of a drill report) and write "
                    "dirty_ratio.png, cleaner_throughput.png and log_sizes.png into DIR.")
    parser.add_argument("--address", default="auto", help="Ray address (default: auto)")
    parser.add_argument("--namespace", default="strata", help="Strata namespace")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON lines")
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write PNG plots into DIR")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="with --plot: how long to sample, in seconds (default 60); the plots "
                             "show only what happened in that time")
    parser.add_argument("--interval", type=float, default=2.0,
                        help="with --plot: seconds between samples (default 2)")
    parser.add_argument("--from-report", type=Path, metavar="FILE",
                        help="plot the samples of a drill report instead of sampling")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ops.tools import UsageError

    if args.from_report is not None:
        if args.plot is None:
            raise UsageError("--from-report needs --plot DIR")
        try:
            doc = json.loads(args.from_report.read_text())
        except (OSError, ValueError) as err:
            raise UsageError(f"cannot read {args.from_report}: {err}") from None
        return _plot(doc.get("samples") or [], args.plot, f"drill {doc.get('drill', '?')}")
    if args.interval <= 0 or args.seconds < 0:
        raise UsageError("--interval must be positive and --seconds not negative")
    from cluster import Cluster
    from cluster.errors import ClusterNotRunningError

    try:
        cluster = Cluster.connect(args.address, namespace=args.namespace)
    except ClusterNotRunningError as err:
        raise UsageError(str(err)) from None
    try:
        if args.plot is None:
            with _said_when_slow(f"asking {len(cluster.description.log_dirs)} log directories "
                                 "and the coordinator"):
                rows = cluster.stats()
            return _print_rows(rows, args.json)
        sampler = StatsSampler(lambda: cluster, args.interval)
        deadline = time.monotonic() + args.seconds
        sampler.begin()
        while True:
            sampler.take()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(args.interval, left))
        return _plot(sampler.samples, args.plot, f"namespace {args.namespace}")
    finally:
        cluster.close()


@contextmanager
def _said_when_slow(what: str, after_s: float = 1.0, every_s: float = 10.0) -> Iterator[None]:
    """A line on stderr when the block has run ``after_s`` seconds (and every ``every_s`` after),
    and one when it ends, so a slow answer (a directory of 100,000 partitions) is not silence."""
    import sys

    began = time.monotonic()
    done = threading.Event()
    said = threading.Event()

    def watch() -> None:
        wait = after_s
        while not done.wait(wait):
            said.set()
            print(f"strata stats: {what} ({time.monotonic() - began:.0f} s so far) ...",
                  file=sys.stderr, flush=True)
            wait = every_s
    watcher = threading.Thread(target=watch, name="strata-stats-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        if said.is_set():
            print(f"strata stats: answered after {time.monotonic() - began:.1f} s",
                  file=sys.stderr, flush=True)


def _plot(samples: list[dict[str, Any]], out_dir: Path, title: str) -> int:
    if not samples:
        print("no samples to plot")
        return 1
    for path in plot_samples(samples, out_dir, title):
        print(path)
    return 0


def _print_rows(rows: list[dict[str, Any]], as_json: bool) -> int:
    if as_json:
        for row in rows:
            print(json.dumps(row, default=str, sort_keys=True))
        return 0
    from ops.tools.output import console, print_table

    table = []
    for row in rows:
        if row["kind"] == "log_dir":
            table.append(("log_dir", row["log_dir"], "", "", "", row.get("log_bytes", ""), "",
                          "online" if row.get("online")
                          else f"offline: {row.get('offline_reason')}"))
        elif row["kind"] == "partition":
            table.append(("partition", row["log_dir"], f"{row['topic']}-{row['partition']}",
                          row["log_start_offset"], row["log_end_offset"], row["size_bytes"],
                          f"{row['dirty_ratio']:.2f}", row["cleanup_policy"]))
        else:
            busy = f"{row['topic']}-{row['partition']}" if row.get("topic") else ""
            table.append(("cleaner", row.get("log_dir") or "", row.get("name", ""), "", "", "",
                          "", f"{row.get('state', '')} {busy}".strip()))
    print_table(console(), "strata stats", ("kind", "log_dir", "name", "log start", "log end",
                                            "size", "dirty ratio", "state"), table)
    return 0
