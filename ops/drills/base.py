"""What every drill shares: its options, its context (cluster, ledger, producers, the report being
filled in) and ``run_drill``, which runs one drill and always returns a report.

A drill is a function ``drill(ctx: DrillContext) -> None`` that opens its cluster
(``ctx.open_env``), starts busy producers (``ctx.setup`` + ``ctx.start_producers``), waits for
acknowledged records, injects its fault (``ctx.inject``), asserts what must hold (``ctx.check``),
and ends with ``ctx.finish()``: producers stopped, every partition read back and compared with the
ledger. Everything a drill sets up (clusters, mounts, immutable flags, damaged bytes) is undone by
callbacks on ``ctx.stack``, also when it fails.
"""

from __future__ import annotations

import datetime
import logging
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ops.drills.env import DrillEnv, DrillTimeout, wait_for
from ops.drills.ledger import Ledger, LedgerRecord, verify
from ops.drills.producer import DrillProducer, combined_stats
from ops.drills.report import Check, DrillReport

logger = logging.getLogger(__name__)

PRODUCER_ID_BASE = 7_000


class DrillSkipped(Exception):
    """The machine cannot run this drill (no tmpfs mount, no chattr); the reason says why."""


@dataclass
class DrillOptions:
    """Knobs of a drill run. The defaults are the small size the test suite uses."""

    address: str | None = None          # Ray address; with it, the drill joins that cluster
    namespace: str = "strata"           # the Strata cluster to join (with ``address``)
    workdir: Path | None = None         # temporary directories, mounts, facts files
    dirs: int = 3
    cleaners: int = 1
    producers: int = 2
    records_per_batch: int = 20
    keys: int = 40
    value_bytes: int = 64
    segment_bytes: int = 16 * 1024
    warmup_records: int = 1500          # acknowledged before the fault
    after_records: int = 400            # acknowledged on the faulty directory after the repair
    timeout_s: float = 120.0            # for every wait
    seed: int = 0
    sample_interval_s: float = 0.5
    tmpfs_size: str = "16m"
    keep_topics: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["workdir"] = None if self.workdir is None else str(self.workdir)
        return d


def topic_configs(options: DrillOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """(plain log topic, compacted topic): small segments, dense indexes, small preallocated
    indexes (a tmpfs of a few MiB must hold several segments)."""
    common = {"segment.bytes": options.segment_bytes, "index.interval.bytes": 512,
              "segment.index.bytes": 64 * 1024}
    return ({**common, "cleanup.policy": "delete"},
            {**common, "cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01})


class DrillContext:
    def __init__(self, name: str, options: DrillOptions, report: DrillReport,
                 stack: ExitStack, workdir: Path) -> None:
        self.name = name
        self.options = options
        self.report = report
        self.stack = stack
        self.workdir = workdir
        self.t0 = time.monotonic()
        self.env: DrillEnv | None = None
        self.ledger = Ledger()
        self.producers: list[DrillProducer] = []
        self.log_topic = ""
        self.kv_topic = ""
        self.sampler: Any = None

    # ---- time and report ---------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.t0

    def inject(self, what: str, target: str, **details: Any) -> None:
        self.report.injections.append({"what": what, "target": target,
                                       "at": round(self.now(), 3), **details})
        logger.info("drill %s: inject %s into %s", self.name, what, target)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.report.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    def skip(self, reason: str) -> None:
        raise DrillSkipped(reason)

    def wait(self, condition: Callable[[], Any], what: str, timeout: float | None = None) -> Any:
        return wait_for(condition, timeout or self.options.timeout_s, what)

    # ---- the cluster -------------------------------------------------------------------------
    def open_env(self, log_dirs: Sequence[str | Path] | None = None, *, own: bool = False,
                 cleaners: int | None = None, config: dict[str, Any] | None = None) -> DrillEnv:
        """Join the cluster of ``options.address``/``namespace`` unless ``own`` (or no address):
        then start one with ``log_dirs`` (default: ``dirs`` directories under the workdir)."""
        o = self.options
        if o.address is not None and not own:
            env = DrillEnv.connect(o.address, o.namespace)
        else:
            dirs = list(log_dirs or [self.workdir / f"d{i}" for i in range(o.dirs)])
            env = DrillEnv.start(dirs, address=o.address, cleaners=cleaners or o.cleaners,
                                 config=config)
        self.stack.callback(env.close, o.keep_topics)
        self.env = env
        self.report.cluster = env.describe()
        from ops.plot import StatsSampler

        self.sampler = StatsSampler(lambda: env.cluster, o.sample_interval_s)
        self.sampler.start()
        self.stack.callback(self.sampler.stop)
        return env

    def setup(self) -> None:
        """Create the drill's two topics (one partition per directory each) and its producers."""
        env = self._env()
        o = self.options
        tag = f"{int(time.time()) % 100000}{o.seed}"
        self.log_topic = f"drill-{self.name}-{tag}-log"
        self.kv_topic = f"drill-{self.name}-{tag}-kv"
        plain, compact = topic_configs(o)
        partitions = len(env.log_dirs)
        env.create_topic(self.log_topic, partitions, plain)
        env.create_topic(self.kv_topic, partitions, compact)
        self.ledger = Ledger(compacted_topics=[self.kv_topic])
        targets = [(t, p) for t in (self.log_topic, self.kv_topic) for p in range(partitions)]
        for i in range(o.producers):
            self.producers.append(DrillProducer(
                PRODUCER_ID_BASE + 100 * o.seed + i, targets, self.ledger,
                handle_for=env.node_for, on_unavailable=env.forget_partition,
                on_moved=env.follow_partition,
                records_per_batch=o.records_per_batch, keys=o.keys, value_bytes=o.value_bytes))
        self.stack.callback(self.stop_producers, 5.0)

    def start_producers(self) -> None:
        for producer in self.producers:
            producer.start()

    def stop_producers(self, deadline_s: float = 60.0) -> None:
        for producer in self.producers:
            producer.stop(deadline_s)

    def partitions(self, log_dir: str | None = None) -> list[tuple[str, int]]:
        """The drill's partitions (those in ``log_dir`` when given)."""
        env = self._env()
        found = [(t, p) for t in (self.log_topic, self.kv_topic)
                 for p in range(len(env.log_dirs))]
        return [tp for tp in found if log_dir is None or env.dir_of(*tp) == log_dir]

    def acked(self, on: Iterable[tuple[str, int]] | None = None) -> int:
        if on is None:
            return self.ledger.count()
        return sum(self.ledger.count(t, p) for t, p in on)

    def wait_acked(self, records: int, on: Iterable[tuple[str, int]] | None = None,
                   what: str = "records acknowledged") -> int:
        """Wait until ``records`` more records are acknowledged (on those partitions)."""
        targets = None if on is None else list(on)
        start = self.acked(targets)
        self.wait(lambda: self._producers_healthy() and self.acked(targets) >= start + records,
                  f"{records} {what}")
        return self.acked(targets) - start

    def _producers_healthy(self) -> bool:
        failed = [p for p in self.producers if p.failure is not None]
        if failed:
            raise RuntimeError(f"drill producer failed: {failed[0].failure!r}")
        return True

    # ---- the end -----------------------------------------------------------------------------
    def finish(self, partitions: Iterable[tuple[str, int]] | None = None,
               excuse: Callable[[LedgerRecord], bool] | None = None) -> None:
        """Stop the producers, read everything back and compare it with the ledger."""
        env = self._env()
        self.stop_producers(self.options.timeout_s / 2)
        stats = combined_stats(self.producers)
        self.report.producers = stats
        self.check("no batch refused by the log", stats["refused"] == 0,
                   f"{stats['acked_batches']} batches acknowledged, {stats['retries']} retries, "
                   f"{stats['duplicates_dropped']} retried batches dropped as duplicates"
                   + (f"; refusals: {stats['errors']}" if stats["refused"] else ""))
        result = verify(self.ledger, env.read, partitions, excuse)
        self.report.verification = result.to_json()
        self.report.ledger = self.ledger.summary()

    def _env(self) -> DrillEnv:
        if self.env is None:
            raise RuntimeError("the drill has not opened its cluster yet")
        return self.env


Drill = Callable[[DrillContext], None]


def run_drill(name: str, drill: Drill, options: DrillOptions) -> DrillReport:
    """Run one drill; never raises (a crash of the drill itself is status "error")."""
    report = DrillReport(drill=name, started_at=datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec="seconds"), settings=options.to_json())
    started = time.monotonic()
    ctx: DrillContext | None = None
    with ExitStack() as stack:
        if options.workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix=f"strata-drill-{name}-")))
        else:
            workdir = Path(options.workdir) / f"{name}-{int(time.time() * 1000)}"
            workdir.mkdir(parents=True, exist_ok=True)
        try:
            ctx = DrillContext(name, options, report, stack, workdir)
            drill(ctx)
            report.decide()
        except DrillSkipped as skipped:
            report.status, report.reason = "skipped", str(skipped)
        except DrillTimeout as timeout:
            report.status, report.reason = "failed", str(timeout)
            report.checks.append(Check("waited condition", False, str(timeout)))
        except Exception as err:  # noqa: BLE001 - the report says what happened
            logger.exception("drill %s crashed", name)
            report.status = "error"
            report.reason = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=8)}"
        finally:
            if ctx is not None:
                if ctx.sampler is not None:
                    ctx.sampler.stop()
                    report.samples = ctx.sampler.samples
                if not report.producers and ctx.producers:
                    report.producers = combined_stats(ctx.producers)
                if not report.ledger:
                    report.ledger = ctx.ledger.summary()
    report.duration_s = time.monotonic() - started
    return report
