"""Drills that kill processes: a node, a cleaner (mid-clean and mid-swap), the coordinator, and a
clean stop and start of everything (``restart-all``)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from ops.drills import inject
from ops.drills.base import DrillContext
from ops.drills.env import DrillTimeout
from ops.drills.ledger import verify


def kill_node(ctx: DrillContext) -> None:
    """kill -9 a node actor's process while producers append to it; Ray restarts it; it takes its
    lock back and recovers; producers retry with their idempotence fields; every acknowledged
    record is at its offset exactly once."""
    from node.lock import read_holder_pid

    env = ctx.open_env()
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    log_dir = env.dir_of(ctx.log_topic, 0)
    mine = ctx.partitions(log_dir)
    retries_before = sum(p.retries for p in ctx.producers)
    old = env.kill_node(log_dir)
    ctx.inject("kill -9 of the node actor's process mid-append", log_dir, pid=old)
    new = env.wait_node_back(log_dir, old, ctx.options.timeout_s)
    ctx.check("Ray restarted the node actor", new != old, f"pid {old} -> {new}")
    holder = read_holder_pid(Path(log_dir))
    ctx.check("the new process holds the directory's .lock", holder == new,
              f".lock names pid {holder}")
    stats = env.stats_of(log_dir)
    ctx.check("the directory loaded as after an unclean shutdown, and is online",
              stats.online and not stats.had_clean_shutdown,
              f"online={stats.online} had_clean_shutdown={stats.had_clean_shutdown}")
    ctx.report.recovery["load_results"] = env.load_results(log_dir)
    gained = ctx.wait_acked(ctx.options.after_records, on=mine,
                            what="records acknowledged by the restarted node")
    ctx.report.recovery["retries_through_restart"] = \
        sum(p.retries for p in ctx.producers) - retries_before
    ctx.check("producers are served again by the restarted node", gained > 0,
              f"{gained} more records acknowledged on {len(mine)} partitions")
    ctx.finish()


def kill_cleaner(ctx: DrillContext) -> None:
    """A cleaner killed mid-clean (its ``.cleaned`` output half written), a cleaner killed while
    the node swaps its output in, and the node itself killed mid-swap (``.swap`` files written,
    old segments still there): each time the partition ends as before or after the clean (the
    latest value of every key equals the ledger's), and no ``.cleaned``/``.swap`` file stays."""
    env = ctx.open_env()
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    topic, partition = ctx.kv_topic, 0
    log_dir = env.dir_of(topic, partition)
    pdir = Path(log_dir) / f"{topic}-{partition}"
    target = f"{topic}-{partition}"

    # 1. mid-clean: every worker is armed; the one that cleans the partition dies
    for name in env.worker_names():
        env.in_actor(env.worker(name), inject.arm_clean_crash, topic, partition, str(pdir),
                     str(ctx.workdir / "cleaner-killed"))
    since = _now_ms()
    env.cluster.trigger_clean(topic, partition, roll=True)
    death = ctx.wait(lambda: _recent(env, topic, partition, since, "cleaner died"),
                     "the armed cleaner died mid-clean")
    ctx.inject("kill -9 of a cleaner mid-clean", target, cleaner_id=death.cleaner_id)
    _expect_clean_after(ctx, env, topic, partition, "mid-clean")

    # 2. the cleaner killed while the node swaps its output in (the node finishes the swap)
    flags = ctx.workdir / "swap-pause"
    flags.mkdir(exist_ok=True)
    env.in_actor(env.node(log_dir), inject.arm_swap, topic, partition, 1, "pause", str(flags))
    since = _now_ms()
    env.cluster.trigger_clean(topic, partition, roll=True)
    ctx.wait(lambda: (flags / "paused").exists(), "a swap reached its pause point")
    busy = [w for w in env.cluster.cleaner_status().workers
            if w.topic == topic and w.partition == partition]
    victims = [env.in_actor(env.worker(w.name), inject.pid) for w in busy]
    for victim in victims:
        os.kill(victim, signal.SIGKILL)
    ctx.inject("kill -9 of the cleaner waiting for its swap", target, pids=victims)
    (flags / "release").touch()
    ctx.wait(lambda: _recent(env, topic, partition, since, "cleaner died"),
             "the coordinator noticed the dead cleaner")
    _expect_clean_after(ctx, env, topic, partition, "cleaner killed mid-swap")

    # 3. the node killed mid-swap: .swap files written, the old segments not yet renamed
    old = env.node_pid(log_dir)
    env.in_actor(env.node(log_dir), inject.arm_swap, topic, partition, 1, "die")
    env.cluster.trigger_clean(topic, partition, roll=True)
    new = env.wait_node_back(log_dir, old, ctx.options.timeout_s)
    ctx.inject("kill -9 of the node in the middle of a swap", log_dir, pid=old)
    results = env.load_results(log_dir).get(target, {})
    ctx.report.recovery["after_node_killed_mid_swap"] = results
    # a group whose records were all superseded cleans into an empty segment: the loader never
    # lets an empty .swap replace live segments (it cannot tell it from a truncated one), so it
    # keeps them and moves the empty swap to quarantine; the clean is simply done again
    from storage import files     # cheap, but the CLI's start-up imports no storage module

    held = pdir / files.QUARANTINE_DIR
    empty_swaps = sorted(p.name for p in held.glob("*.log.swap.*")
                         if p.stat().st_size == 0) if held.is_dir() else []
    ctx.check("the restarted node completed the interrupted swap, or kept the live segments "
              "in place of an empty one",
              results.get("completed_swaps", 0) >= 1 or bool(empty_swaps),
              f"load result {results}, empty swaps quarantined {empty_swaps}, pid {new}")
    _expect_clean_after(ctx, env, topic, partition, "node killed mid-swap")

    ctx.finish()
    leftovers = _settled_temp_files(ctx, env.temp_files)
    ctx.check("no .cleaned or .swap file stays", leftovers == [],
              ", ".join(leftovers) or "none in any partition")


def _expect_clean_after(ctx: DrillContext, env: Any, topic: str, partition: int,
                        phase: str) -> None:
    """A clean of the partition completes after the fault, and the partition then holds the
    latest acknowledged value of every key (as before or after a clean, never between)."""
    pdir = Path(env.dir_of(topic, partition)) / f"{topic}-{partition}"
    since = _now_ms()
    env.cluster.trigger_clean(topic, partition, roll=True)
    done = ctx.wait(lambda: _recent(env, topic, partition, since, "cleaned"),
                    f"a clean of {topic}-{partition} completed after the {phase} fault")
    temp = _settled_temp_files(ctx, lambda: _temp(pdir))
    result = verify(ctx.ledger, env.read, [(topic, partition)])
    ctx.check(f"{phase}: the log is as before or after the clean",
              result.ok and not temp,
              f"clean {done.first_dirty_offset}..{done.next_dirty_offset} completed; "
              f"latest of every key as in the ledger: {result.ok} "
              f"(lost {result.lost}, misplaced {result.misplaced}, duplicated "
              f"{result.duplicated}, phantom {result.phantom}; examples {result.examples}); "
              f"temporary files: {temp or 'none'}")


def _settled_temp_files(ctx: DrillContext, listing: Any) -> list[str]:
    """The temporary files still there once the cleaning settled (a failed clean's ``.cleaned``
    files go at the coordinator's next round): empty, or what stayed for 30 s."""
    try:
        ctx.wait(lambda: not listing(), "no .cleaned/.swap files", timeout=30)
    except DrillTimeout:
        pass
    return list(listing())


def _temp(pdir: Path) -> list[str]:
    return [n for n in os.listdir(pdir) if n.endswith((".cleaned", ".swap"))]


def _recent(env: Any, topic: str, partition: int, since_ms: int, outcome: str) -> Any:
    for s in env.cluster.cleaner_status().recent:
        if (s.topic, s.partition, s.outcome) == (topic, partition, outcome) and \
                s.finished_ms >= since_ms:
            return s
    return None


def _now_ms() -> int:
    return int(time.time() * 1000)


def kill_coordinator(ctx: DrillContext) -> None:
    """kill -9 the coordinator while cleaners work: Ray restarts it; cleaning resumes from the
    cleaner checkpoints (a clean completes after the restart, starting at or above the
    checkpointed offset); no partition is ever cleaned by two cleaners at once."""
    env = ctx.open_env(cleaners=max(2, ctx.options.cleaners))
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    ctx.wait(lambda: env.cluster.cleaner_status().cleans_completed >= 1, "a first clean")
    checkpoints: dict[tuple[str, int], int] = {}
    for log_dir in env.log_dirs:
        try:
            found = env.node(log_dir).call("read_cleaner_checkpoint", timeout=30)
        except FileNotFoundError:
            continue
        checkpoints.update({(tp.topic, tp.partition): o for tp, o in found.items()})
    overlap = _OverlapWatch(env)
    overlap.start()
    try:
        coordinator = env.coordinator()
        old = env.in_actor(coordinator, inject.pid)
        killed_ms = _now_ms()
        os.kill(old, signal.SIGKILL)
        ctx.inject("kill -9 of the coordinator", coordinator.name, pid=old)
        new = ctx.wait(lambda: (p := env.in_actor(env.coordinator(), inject.pid, timeout=10))
                       != old and p, "the coordinator restarted")
        ctx.check("Ray restarted the coordinator", new != old, f"pid {old} -> {new}")

        def resumed() -> Any:
            for s in env.cluster.cleaner_status().recent:
                if s.outcome == "cleaned" and s.finished_ms >= killed_ms and \
                        (s.topic, s.partition) in checkpoints:
                    return s
            return None
        clean = ctx.wait(resumed, "a clean of a checkpointed partition after the restart")
        start = checkpoints[(clean.topic, clean.partition)]
        ctx.check("cleaning resumed from the checkpoint, not from the start",
                  clean.first_dirty_offset >= start > 0,
                  f"{clean.topic}-{clean.partition}: checkpoint {start}, the clean after the "
                  f"restart started at {clean.first_dirty_offset}")
        ctx.wait_acked(ctx.options.after_records, what="records acknowledged after the restart")
    finally:
        overlap.stop()
    ctx.check("no partition was cleaned by two cleaners at once", not overlap.overlaps,
              f"{overlap.polls} polls of every cleaner; overlaps: {overlap.overlaps[:3]}")
    ctx.report.recovery["checkpoints_before_kill"] = {f"{t}-{p}": o for (t, p), o in
                                                      checkpoints.items()}
    ctx.finish()


class _OverlapWatch:
    """Polls every cleaner worker itself (not the coordinator's view of them) and records any
    moment two of them work on the same partition."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="overlap-watch", daemon=True)
        self.polls = 0
        self.overlaps: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        workers = {name: self._env.worker(name) for name in self._env.worker_names()}
        while not self._stop.is_set():
            pending = {n: h.submit("status") for n, h in workers.items()}
            busy: dict[Any, str] = {}
            for name, p in pending.items():
                try:
                    status = p.result(10)
                except Exception:  # noqa: BLE001 - a worker restarting is busy with nothing
                    continue
                if status.busy_with is None:
                    continue
                if status.busy_with in busy:
                    self.overlaps.append(f"{status.busy_with} by {busy[status.busy_with]} "
                                         f"and {name}")
                busy[status.busy_with] = name
            self.polls += 1
            self._stop.wait(0.02)


def restart_all(ctx: DrillContext) -> None:
    """A clean stop of every actor and a start of the same cluster again, producers retrying
    throughout: every directory reports a clean shutdown and re-validates no segment; nothing is
    lost."""
    from cluster import Cluster
    from cluster.runtime import deploy

    env = ctx.open_env()
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    description = env.cluster.description
    stopped = deploy.shutdown(description.namespace)
    ctx.inject("clean stop of the whole cluster", description.namespace,
               log_dirs=list(description.log_dirs))
    ctx.check("every actor stopped", stopped is not None)
    # the same cluster again, down to who owns its Ray head: a cluster that `strata cluster
    # start` started with a head of its own must still stop that head at `strata cluster stop`
    cluster = Cluster.start(log_dirs=list(description.log_dirs),
                            config=dict(description.properties),
                            namespace=description.namespace, address=env.address,
                            timeout_s=ctx.options.timeout_s,
                            head_started_by_strata=description.head_started_by_strata)
    env.replace_cluster(cluster)
    ctx.inject("start of the same cluster", description.namespace)
    changed = [f.name for f in dataclasses.fields(description)
               if getattr(cluster.description, f.name) != getattr(description, f.name)]
    ctx.check("the cluster came back as it was (directories, actors, settings, head owner)",
              not changed, f"changed: {', '.join(changed)}" if changed else "nothing changed")
    recovered: dict[str, Any] = {}
    for log_dir in env.log_dirs:
        stats = env.stats_of(log_dir)
        results = env.load_results(log_dir)
        recovered[log_dir] = {"had_clean_shutdown": stats.had_clean_shutdown,
                              "partitions": results}
        touched = {n: r for n, r in results.items()
                   if r["recovered_segments"] or r["truncated_bytes"]}
        ctx.check(f"{log_dir}: clean shutdown seen, nothing recovered",
                  stats.had_clean_shutdown and not touched,
                  f"had_clean_shutdown={stats.had_clean_shutdown}; partitions re-validated: "
                  f"{sorted(touched) or 'none'}")
    ctx.report.recovery["directories"] = recovered
    gained = ctx.wait_acked(ctx.options.after_records, what="records acknowledged after the start")
    ctx.check("producers are served again after the start", gained > 0, f"+{gained} records")
    ctx.finish()
