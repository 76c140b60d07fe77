"""Drills that damage a disk: full (``disk-full``), permission lost (``disk-fail``), a torn write
after a power loss (``torn-write``) and random bytes in files at rest (``corrupt``)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

from ops.drills import inject
from ops.drills.base import DrillContext
from ops.drills.ledger import LogRecord, verify

HEADROOM_BYTES = 192 * 1024
TORN_EXTRA_BATCHES = 3


# ---- disk-full and disk-fail -------------------------------------------------------------------
def disk_full(ctx: DrillContext) -> None:
    """One directory on a small tmpfs fills up: it goes offline, the others keep serving, nothing
    acknowledged is lost; after the space is freed and its node restarted it serves again."""
    # every directory on a tmpfs of its own, of one size, so every directory (the one that fills
    # up included) gets an even share of the partitions
    mounts = [_mount_tmpfs(ctx, ctx.workdir / f"tmpfs{i}", ctx.options.tmpfs_size)
              for i in range(ctx.options.dirs)]
    mount = mounts[0]
    full_dir = mount / "logs"
    env = ctx.open_env([m / "logs" for m in mounts], own=True)
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    ballast = mount / "ballast"
    free = shutil.disk_usage(mount).free
    _write_ballast(ballast, max(0, free - HEADROOM_BYTES))
    ctx.inject("fill the file system", str(full_dir), ballast_bytes=ballast.stat().st_size,
               left_free=shutil.disk_usage(mount).free)

    def repair() -> None:
        ballast.unlink(missing_ok=True)
        ctx.inject("repair: free the space", str(full_dir))
    _offline_and_back(ctx, str(full_dir), ("No space left", "ENOSPC", "short write"), repair)


def disk_fail(ctx: DrillContext) -> None:
    """One directory loses write permission (``chattr +i`` on a partition's directory and active
    segment): it goes offline, the others keep serving, nothing acknowledged is lost; after
    ``chattr -i`` and a restart of its node it serves again."""
    if shutil.which("chattr") is None:
        ctx.skip("chattr is not installed; disk-fail needs it to take write permission away")
    env = ctx.open_env(own=True)
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    log_dir = env.dir_of(ctx.log_topic, 0)
    pdir = Path(log_dir) / f"{ctx.log_topic}-0"
    active = max(pdir.glob("*.log"))
    marked: list[Path] = []

    def clear() -> None:
        while marked:
            subprocess.run(["chattr", "-i", str(marked.pop())], capture_output=True)
    ctx.stack.callback(clear)
    for path in (pdir, active):
        result = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if result.returncode != 0:
            ctx.skip(f"chattr +i does not work here: {result.stderr.strip()}")
        marked.append(path)
    ctx.inject("chattr +i (write permission lost)", str(pdir), files=[str(p) for p in marked])

    def repair() -> None:
        clear()
        ctx.inject("repair: chattr -i", str(pdir))
    _offline_and_back(ctx, log_dir, ("EPERM", "Operation not permitted", "EACCES"), repair)


def _offline_and_back(ctx: DrillContext, log_dir: str, reasons: tuple[str, ...],
                      repair: Callable[[], None]) -> None:
    env = ctx.env
    assert env is not None
    mine = ctx.partitions(log_dir)
    others = [tp for tp in ctx.partitions() if tp not in mine]
    stats = ctx.wait(lambda: (s := env.stats_of(log_dir)) and not s.online and s,
                     f"{log_dir} offline")
    ctx.check("the directory went offline with the I/O error as the reason",
              any(r in (stats.offline_reason or "") for r in reasons),
              stats.offline_reason or "")
    gained = ctx.wait_acked(ctx.options.after_records, on=others,
                            what="records acknowledged by the other directories")
    still = env.stats_of(log_dir)
    ctx.check("the other directories kept serving while it was offline",
              gained > 0 and not still.online,
              f"+{gained} records on {len(others)} partitions elsewhere; the directory stayed "
              f"offline meanwhile: {not still.online}")
    repair()
    old = env.node_pid(log_dir)
    os.kill(old, 9)
    ctx.inject("restart of the directory's node actor", log_dir, pid=old)
    new = env.wait_node_back(log_dir, old, ctx.options.timeout_s)
    back = env.stats_of(log_dir)
    ctx.check("the directory is online again after the repair", back.online,
              f"pid {old} -> {new}; offline_reason={back.offline_reason}")
    ctx.report.recovery["load_results"] = env.load_results(log_dir)
    gained = ctx.wait_acked(ctx.options.after_records, on=mine,
                            what="records acknowledged by the repaired directory")
    ctx.check("the repaired directory serves again", gained > 0,
              f"+{gained} records on its {len(mine)} partitions")
    ctx.finish()


def _mount_tmpfs(ctx: DrillContext, target: Path, size: str) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        ctx.skip(f"cannot mount a tmpfs ({result.stderr.strip() or 'not root?'}); disk-full "
                 "needs a small file system to fill")

    def unmount() -> None:
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)
    ctx.stack.callback(unmount)
    return target


def _write_ballast(path: Path, size: int) -> None:
    chunk = b"\0" * (1 << 20)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            try:
                left -= f.write(chunk[:min(left, len(chunk))])
            except OSError:
                break


# ---- torn-write --------------------------------------------------------------------------------
def torn_write(ctx: DrillContext) -> None:
    """A power loss in the middle of a write: the active segment is cut at a random byte past the
    recovery point while its log is locked, and the node dies without a clean shutdown. Recovery
    truncates to the last valid batch; the report says how many bytes and records it dropped,
    and none of them had been acknowledged."""
    env = ctx.open_env()
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    topic, partition = ctx.log_topic, 0
    log_dir = env.dir_of(topic, partition)
    facts_path = ctx.workdir / "torn-write.json"
    old = env.node_pid(log_dir)
    try:
        env.in_actor(env.node(log_dir), inject.tear_active_segment, topic, partition,
                     ctx.options.seed, TORN_EXTRA_BATCHES, str(facts_path))
    except Exception:  # noqa: BLE001 - the node dies inside the call, as it should
        pass
    new = env.wait_node_back(log_dir, old, ctx.options.timeout_s)
    facts = json.loads(env.in_actor(env.node(log_dir), inject.read_text, str(facts_path)))
    extras = inject.torn_records(ctx.options.seed, TORN_EXTRA_BATCHES)
    ctx.ledger.in_doubt(topic, partition, extras)   # written, never acknowledged to anyone
    ctx.inject("power loss: active segment cut past the recovery point",
               facts["segment"], cut_at=facts["cut_at"], bytes_cut=facts["bytes_cut"],
               recovery_point=facts["recovery_point"], pid=old)
    loaded = env.load_results(log_dir)[f"{topic}-{partition}"]
    kept_end = facts["expected_log_end_offset"]
    loaded_end = loaded["loaded_log_end_offset"]
    dropped_records = facts["log_end_offset_before"] - loaded_end
    expected_truncation = facts["cut_at"] - (facts["torn_batch"]["position"]
                                             if facts["torn_batch"] else facts["cut_at"])
    ctx.check("recovery truncated to the last valid batch",
              loaded_end == kept_end and loaded["truncated_bytes"] == expected_truncation,
              f"log end {loaded_end} (last whole batch ends at {kept_end}); recovery truncated "
              f"{loaded['truncated_bytes']} bytes of the torn batch (expected "
              f"{expected_truncation}); pid {old} -> {new}")
    log = {r.value: r.offset for r in env.read(topic, partition)}
    dropped_range = range(loaded_end, facts["log_end_offset_before"])
    lost = [r for r in ctx.ledger.acknowledged(topic, partition)
            if r.offset in dropped_range and log.get(r.value) != r.offset]
    ctx.check("none of the dropped records had been acknowledged", not lost,
              f"{dropped_records} records dropped (offsets {loaded_end}.."
              f"{facts['log_end_offset_before'] - 1}); acknowledged among them: {len(lost)}")
    ctx.report.recovery.update({
        "segment": facts["segment"], "recovery_point": facts["recovery_point"],
        "bytes_cut_by_power_loss": facts["bytes_cut"],
        "bytes_truncated_by_recovery": loaded["truncated_bytes"],
        "records_dropped": dropped_records, "acknowledged_records_dropped": len(lost),
        "load_result": loaded})
    ctx.wait_acked(ctx.options.after_records, on=ctx.partitions(log_dir),
                   what="records acknowledged after recovery")
    ctx.finish()


# ---- corrupt -----------------------------------------------------------------------------------
def corrupt(ctx: DrillContext) -> None:
    """Random bytes in a closed segment, in an offset index and in a checkpoint of a live
    directory: the checks of ``strata recover --dry-run`` find each one and name its file and
    position; every other partition and every undamaged batch of the damaged one still reads
    back; the original bytes are put back afterwards and nothing is lost."""
    from storage import files

    env = ctx.open_env()
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    topic, partition = ctx.log_topic, 0
    log_dir = env.dir_of(topic, partition)
    pdir = Path(log_dir) / f"{topic}-{partition}"
    ctx.wait(lambda: len(list(pdir.glob("*.log"))) >= 4, "three closed segments")
    for producer in ctx.producers:
        producer.pause()
    ctx.wait(lambda: _quiet(env, pdir), "appends paused")
    rng = random.Random(ctx.options.seed)
    restore = _Restore()
    ctx.stack.callback(restore)
    closed = sorted(pdir.glob("*.log"))[:-1]

    # a batch in the middle of the last closed segment
    segment = closed[-1]
    base = files.offset_from_file_name(segment.name)
    batch = _pick_batch(segment, rng)
    spots = sorted(rng.sample(range(batch["position"] + 61, batch["position"] + batch["size"]),
                              3))
    restore.damage(segment, spots, rng)
    ctx.inject("random bytes in a closed segment", str(segment), positions=spots,
               batch=batch)
    # an entry of the first closed segment's offset index
    index = files.index_file(pdir, files.offset_from_file_name(closed[0].name))
    entries = index.stat().st_size // 8
    entry = rng.randrange(1, max(2, entries))
    restore.damage(index, list(range(entry * 8, entry * 8 + 8)), rng)
    ctx.inject("random bytes in an offset index", str(index), positions=[entry * 8],
               entry=entry)
    # a checkpoint. The text format has no checksum: a digit turned into another digit, or a
    # topic name into another name, cannot be told from real content by any tool (Kafka's
    # neither), so the damage goes into a number and is a byte no number holds
    env.node(log_dir).call("checkpoint", timeout=60)   # written now, unchanged while paused
    checkpoint = Path(log_dir) / files.RECOVERY_POINT_CHECKPOINT
    text = checkpoint.read_bytes()
    numbers = [i for line_start, line in _lines(text)
               for i in _number_positions(line, line_start)]
    spot = rng.choice(numbers)
    restore.damage(checkpoint, [spot], rng, alphabet=b"#@!?~^{}")
    ctx.inject("a random byte in a checkpoint", str(checkpoint), positions=[spot])

    found = _find(Path(log_dir))
    rel = lambda p: str(Path(p).relative_to(log_dir))   # noqa: E731
    for path, position, kinds in ((segment, batch["position"], ("corrupt-batch",)),
                                  (index, None, ("corrupt-index",)),
                                  (checkpoint, None, ("corrupt-checkpoint",))):
        hits = [f for f in found if f["file"] == rel(path) and f["kind"] in kinds]
        exact = [f for f in hits if position is None or f["position"] == position]
        ctx.check(f"damage found in {rel(path)}", bool(exact),
                  "; ".join(f"{f['kind']} at position {f['position']}: {f['message']}"
                            for f in hits) or f"nothing reported; findings: {found[:5]}")
    ctx.report.recovery["findings"] = found

    others = [tp for tp in ctx.partitions() if tp != (topic, partition)]
    elsewhere = verify(ctx.ledger, env.read, others)
    ctx.check("every other partition reads back in full", elsewhere.ok,
              f"{elsewhere.acknowledged} records on {len(others)} partitions; lost "
              f"{elsewhere.lost}")
    bad = range(batch["base_offset"], batch["last_offset"] + 1)
    wanted = {r.offset: r.value for r in ctx.ledger.acknowledged(topic, partition)
              if r.offset not in bad}
    got = _read_around(env, topic, partition, bad)
    missing = [o for o, v in wanted.items() if got.get(o) != v]
    ctx.check("the undamaged batches of the damaged partition read back", not missing,
              f"{len(wanted) - len(missing)} of {len(wanted)} records outside offsets "
              f"{bad.start}..{bad.stop - 1}; unreadable: {missing[:5]}")
    restore()
    ctx.inject("repair: original bytes written back", str(pdir))
    for producer in ctx.producers:
        producer.resume()
    ctx.wait_acked(ctx.options.after_records // 2, what="records acknowledged after the repair")
    ctx.finish()


def _lines(text: bytes) -> list[tuple[int, bytes]]:
    out, start = [], 0
    for line in text.split(b"\n"):
        out.append((start, line))
        start += len(line) + 1
    return out


def _number_positions(line: bytes, start: int) -> list[int]:
    """Positions of the bytes of a checkpoint line's numbers (version, count, or the partition
    and offset after the topic name)."""
    fields = line.split(b" ")
    skip = len(fields[0]) + 1 if len(fields) == 3 else 0
    return [start + i for i in range(skip, len(line)) if line[i:i + 1].isdigit()]


class _Restore:
    """Remembers the original bytes of every damaged spot and writes them back (once)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Path, int, bytes]] = []

    def damage(self, path: Path, positions: list[int], rng: random.Random,
               alphabet: bytes | None = None) -> None:
        with open(path, "r+b") as f:
            for position in positions:
                f.seek(position)
                old = f.read(1)
                new = bytes([rng.choice(alphabet)]) if alphabet else \
                    bytes([old[0] ^ rng.randrange(1, 256)])
                f.seek(position)
                f.write(new)
                self._saved.append((path, position, old))
            f.flush()
            os.fsync(f.fileno())

    def __call__(self) -> None:
        while self._saved:
            path, position, old = self._saved.pop()
            with open(path, "r+b") as f:
                f.seek(position)
                f.write(old)


def _pick_batch(segment: Path, rng: random.Random) -> dict[str, int]:
    from storage.records import scan_batches

    scan = scan_batches(segment.read_bytes(), check_crc=True)
    i = rng.randrange(len(scan) // 3, max(len(scan) // 3 + 1, 2 * len(scan) // 3))
    return {"position": int(scan.positions[i]), "size": int(scan.sizes[i]),
            "base_offset": int(scan.base_offsets[i]), "last_offset": int(scan.last_offsets[i])}


def _quiet(env: Any, pdir: Path) -> bool:
    """No producer call in flight: the segment sizes stay put for a moment."""
    import time

    before = [p.stat().st_size for p in sorted(pdir.glob("*.log"))]
    time.sleep(0.2)
    return before == [p.stat().st_size for p in sorted(pdir.glob("*.log"))]


def _find(log_dir: Path) -> list[dict[str, Any]]:
    """The findings of ``strata recover --dry-run``'s checks on a directory (read-only)."""
    from ops.tools.recover import check_directory
    from storage.config import LogConfig

    result = check_directory(log_dir, lambda _: None, LogConfig().max_message_bytes)
    return [{"partition": name, **f.to_json()} for name, f in result.all_findings()]


def _read_around(env: Any, topic: str, partition: int, bad: range) -> dict[int, bytes | None]:
    """Every record outside ``bad`` through the node, batch by batch, never decoding a batch
    that overlaps ``bad``."""
    from storage.records import iter_batches

    node = env.node_for(topic, partition)
    start, end = node.call("offsets", topic, partition, timeout=30)
    got: dict[int, bytes | None] = {}
    offset = start
    while offset < end:
        if offset in bad:
            offset = bad.stop
            continue
        fetch = node.call("read_raw", topic, partition, offset, 64 * 1024, timeout=30)
        if fetch is None:
            break
        moved = False
        for batch in iter_batches(fetch.data):
            first, last = batch.header.base_offset, batch.next_offset - 1
            if first <= bad.stop - 1 and last >= bad.start:
                offset = max(offset, bad.stop)
                moved = True
                break
            for record in batch.records():
                got[record.offset] = record.value
            offset = max(offset, batch.next_offset)
            moved = True
        if not moved:
            break
    return got

