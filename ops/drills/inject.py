"""Faults injected from inside an actor's process, and small probes of its state.

A drill ships these functions to a node or cleaner actor with Ray's built-in ``__ray_call__``
(``handle.__ray_call__.remote(fn, *args)`` runs ``fn(actor_instance, *args)`` in the actor). That
built-in method is never retried (``max_task_retries`` 0), so a function that ends the process is
not replayed on the restarted actor: no poison call (reference/ray-spark.md §1). Running inside
the process makes the faults race-free: a torn write is cut while the log's lock is held, so no
append can slip in between the cut and the death, and a kill armed at a point of the code fires
exactly there.

Each ``kill`` is ``SIGKILL`` to the process itself: no ``finally``, no ``atexit``, no clean
shutdown marker, the same as ``kill -9`` from outside. Ray restarts the actor (``max_restarts`` -1).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any


def pid(actor: Any) -> int:
    return os.getpid()


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


# ---- node actors -------------------------------------------------------------------------------
def load_results(node: Any) -> dict[str, dict[str, int]]:
    """``LoadResult`` of every partition (what the loader truncated and recovered), by name."""
    results = {}
    for (topic, partition), lg in node.log_dir.logs().items():
        r = lg.load_result
        results[f"{topic}-{partition}"] = {
            "truncated_bytes": r.truncated_bytes, "recovered_segments": r.recovered_segments,
            "rebuilt_indexes": r.rebuilt_indexes, "deleted_temp_files": r.deleted_temp_files,
            "completed_swaps": r.completed_swaps, "log_end_offset": lg.log_end_offset,
            "loaded_log_end_offset": r.log_end_offset,
            "recovery_point": r.recovery_point}
    return results


def dir_facts(node: Any) -> dict[str, Any]:
    d = node.log_dir
    return {"pid": os.getpid(), "had_clean_shutdown": d.had_clean_shutdown,
            "online": d.online, "offline_reason": d.offline_reason}


def tear_active_segment(node: Any, topic: str, partition: int, seed: int, extra_batches: int,
                        facts_path: str) -> None:
    """Power loss in the middle of a write: append ``extra_batches`` batches nobody is told about
    (the tail a power loss catches unflushed), cut the active segment at a random byte past the
    recovery point, write what was done to ``facts_path`` and die without a clean shutdown.
    The log's lock is held throughout, so no acknowledged append lands after the cut."""
    from storage.records import Record, build_batch

    lg = node.log_dir.log(topic, partition)
    rng = random.Random(seed)
    with lg._lock:   # noqa: SLF001 - the drill freezes the log; the process dies holding it
        recovery_point = lg.recovery_point
        first_extra = lg.log_end_offset
        for i in range(extra_batches):
            records = [Record(key=k, value=v, timestamp=1_700_000_000_000)
                       for k, v in torn_records(seed, 1, i)]
            lg.append_batch(build_batch(records))
        segment = lg.active_segment
        batches = list(segment.batches())
        flushed = [b for b in batches if b.last_offset < recovery_point]
        start = flushed[-1].position + flushed[-1].size if flushed else 0
        size = segment.size
        cut = rng.randrange(start + 1, size) if size > start + 1 else start
        torn = [b for b in batches if b.position < cut < b.position + b.size]
        kept = [b for b in batches if b.position + b.size <= cut]
        facts = {"segment": str(segment.log_path), "segment_base_offset": segment.base_offset,
                 "recovery_point": recovery_point, "recovery_point_position": start,
                 "size_before": size, "cut_at": cut, "bytes_cut": size - cut,
                 "log_end_offset_before": lg.log_end_offset,
                 "first_unacknowledged_extra_offset": first_extra,
                 "torn_batch": None if not torn else {"position": torn[0].position,
                                                      "base_offset": torn[0].base_offset,
                                                      "last_offset": torn[0].last_offset},
                 "expected_log_end_offset": kept[-1].last_offset + 1 if kept
                 else segment.base_offset,
                 "pid": os.getpid()}
        Path(facts_path).write_text(json.dumps(facts))
        os.truncate(segment.log_path, cut)
        _die()


def torn_records(seed: int, batches: int, first: int = 0) -> list[tuple[bytes, bytes]]:
    """(key, value) of the records ``tear_active_segment`` appends unacknowledged."""
    return [(b"torn-k%d" % j, b"torn/%d/%d/%d" % (seed, i, j))
            for i in range(first, first + batches) for j in range(10)]


def read_text(actor: Any, path: str) -> str:
    return Path(path).read_text()


def arm_swap(node: Any, topic: str, partition: int, at_fsync: int, mode: str,
             flags_dir: str = "") -> str:
    """Arm the next ``replace_segments`` of the partition: at its ``at_fsync``-th directory fsync
    (1: the cleaned segment renamed ``.swap``, the old ones still in place; 2: every rename done)
    the node dies (``mode`` "die"), or writes ``<flags_dir>/paused`` and waits until
    ``<flags_dir>/release`` exists (``mode`` "pause", at most a minute) and goes on."""
    import storage.log_swap as swap_module

    lg = node.log_dir.log(topic, partition)
    real_fsync = swap_module.fsync_dir
    original = lg.replace_segments
    state = {"armed": False, "count": 0, "fired": False}

    def fire() -> None:
        state["fired"] = True
        if mode == "die":
            _die()
        flags = Path(flags_dir)
        (flags / "paused").touch()
        deadline = time.monotonic() + 60
        while not (flags / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)

    def fsync_hook(path: Any) -> None:
        real_fsync(path)
        if state["armed"] and not state["fired"] and Path(path) == lg.dir:
            state["count"] += 1
            if state["count"] == at_fsync:
                fire()

    def replace_hook(new_segments: Any, old_segments: Any, *args: Any, **kwargs: Any) -> None:
        state["armed"] = not state["fired"]
        try:   # the cleaner passes the identities it read (``expected``): forward every argument
            original(new_segments, old_segments, *args, **kwargs)
        finally:
            state["armed"] = False

    swap_module.fsync_dir = fsync_hook
    lg.replace_segments = replace_hook
    return str(lg.dir)


def arm_clean_crash(worker: Any, topic: str, partition: int, partition_dir: str,
                    once_path: str) -> int:
    """Arm the cleaner to die in its next clean of the partition, at the first progress check
    after a ``.cleaned`` file exists (mid-clean: output half written, nothing swapped). Of all the
    cleaners armed with one ``once_path``, only the first to get there dies."""
    from storage import files

    cleaner = worker._loaded_cleaner()   # noqa: SLF001 - the drill hooks the worker's cleaner
    inner = cleaner.check_done

    def hooked(tp: Any) -> None:
        if tp.topic == topic and tp.partition == partition and any(
                name.endswith(files.CLEANED_SUFFIX) for name in os.listdir(partition_dir)):
            try:
                os.close(os.open(once_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                _die()
        inner(tp)

    cleaner.check_done = hooked
    return os.getpid()
