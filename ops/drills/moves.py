"""The ``move`` drill: partitions moved between log directories while producers append to them
(KIP-113), each process killed in turn during a move, then a drain of a directory under load."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from ops.drills import inject
from ops.drills.base import DrillContext

VICTIMS = (None, "coordinator", "target", "source")


def move(ctx: DrillContext) -> None:
    """Moves under load: one untouched, then one each with the coordinator, the target node and
    the source node killed (kill -9) as the move starts; then ``log-dirs drain`` of a directory.
    A copy interrupted by the target's kill stays in its ``-future`` directory, and the move run
    again resumes it, as an operator would run it. After each: exactly one directory serves the
    partition, no ``-future`` directory is left, and producers are served again; at the end every acknowledged record is read back exactly
    once (the ledger)."""
    from ops.cli.log_dir_moves import plan_drain, rooms_of

    env = ctx.open_env()
    ctx.setup()
    ctx.start_producers()
    ctx.wait_acked(ctx.options.warmup_records)
    outcomes: dict[str, str] = {}
    topics = (ctx.log_topic, ctx.kv_topic)
    for i, victim in enumerate(VICTIMS):
        topic = topics[i % 2]
        source = ctx.wait(lambda: _where(env, topic, 0),      # as the coordinator routes it
                          "the coordinator answers")
        target = next(d for d in env.log_dirs if os.path.abspath(d) != source)
        outcome = _move_and_kill(ctx, env, topic, source, target, victim)
        if victim == "target":
            outcome += f"; {_resume_if_interrupted(ctx, env, topic, target)}"
        outcomes[victim or "none"] = outcome
        copies = ctx.wait(lambda: _settled(env, topic), f"{topic}-0 settled after the move")
        ctx.check(f"move with {victim or 'nothing'} killed: one live copy, no -future left",
                  len(copies) == 1, f"{outcome}; served by {copies}")
        ctx.wait_acked(ctx.options.after_records // 4,
                       what=f"records acknowledged after the move ({victim or 'no kill'})")

    rows = ctx.wait(env.cluster.stats, "every node answers")
    held = [r for r in rows if r["kind"] == "partition" and r["topic"] in topics]
    drained = max(sorted({r["log_dir"] for r in held}),
                  key=lambda d: sum(r["log_dir"] == d for r in held))   # the busiest
    mine = [(r["topic"], r["partition"], r["size_bytes"]) for r in held
            if r["log_dir"] == drained]
    moves = plan_drain(drained, mine, rooms_of(rows))
    for m in moves:
        env.cluster.move_partition(m.topic, m.partition, m.target_dir)
    ctx.inject("drain of a directory under load", drained, moves=len(moves))
    left = [tp for tp in ctx.partitions()
            if ctx.wait(lambda: _where(env, *tp), "a route") == os.path.abspath(drained)]
    ctx.check("the drained directory holds none of the drill's partitions",
              not left and len(moves) >= 2,
              f"{len(moves)} partitions moved off {drained}; still there: {left or 'none'}")
    ctx.wait_acked(ctx.options.after_records // 4, what="records acknowledged after the drain")
    ctx.report.recovery["moves"] = outcomes
    ctx.finish()


def _move_and_kill(ctx: DrillContext, env: Any, topic: str, source: str, target: str,
                   victim: str | None) -> str:
    """Start moving ``topic``-0 from ``source`` to ``target``, kill ``victim`` at once, and
    return how the move call ended."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(env.cluster.move_partition(topic, 0, target))
        except Exception as err:  # noqa: BLE001 - a kill may fail it; the checks judge
            result.append(err)

    mover = threading.Thread(target=run, name=f"drill-move-{topic}", daemon=True)
    mover.start()
    if victim is not None:
        handle = {"coordinator": lambda: env.coordinator(), "target": lambda: env.node(target),
                  "source": lambda: env.node(source)}[victim]()
        pid = env.in_actor(handle, inject.pid)
        os.kill(pid, signal.SIGKILL)
        ctx.inject(f"kill -9 of the {victim} during a move", f"{topic}-0", pid=pid,
                   source=source, target_dir=target)
        if victim != "coordinator":
            env.forget(target if victim == "target" else source)
            env.wait_node_back(target if victim == "target" else source, pid,
                               ctx.options.timeout_s)
    else:
        ctx.inject("move under load", f"{topic}-0", source=source, target_dir=target)
    mover.join(ctx.options.timeout_s)
    if not result:
        return "the move call did not return"
    done = result[0]
    if isinstance(done, Exception):
        return f"move ended with {type(done).__name__}: {str(done)[:300]}"
    return f"moved in {done.elapsed_ms:.0f} ms, appends held {done.held_ms:.1f} ms"


def _resume_if_interrupted(ctx: DrillContext, env: Any, topic: str, target: str) -> str:
    """Run the move of ``topic``-0 into ``target`` again when the target's kill left its copy
    there to resume (``node.move``); returns what happened."""
    if not any(n.startswith(f"{topic}-0.") and n.endswith("-future")
               for n in os.listdir(target)):
        return "no copy left to resume"
    ctx.inject("the interrupted move run again (it resumes the copy)", f"{topic}-0",
               target_dir=target)
    try:
        done = env.cluster.move_partition(topic, 0, target)
    except Exception as err:  # noqa: BLE001 - the settled check judges
        return f"the move run again ended with {type(err).__name__}: {str(err)[:300]}"
    return f"the move run again resumed the copy: {done.bytes_copied} bytes copied"


def _where(env: Any, topic: str, partition: int) -> str:
    env.cluster.partitions(topic)
    return env.dir_of(topic, partition)


def _settled(env: Any, topic: str) -> list[str] | None:
    """The directories serving ``topic``-0 once no ``-future`` directory is left, else None."""
    held = []
    for log_dir in env.log_dirs:
        names = os.listdir(log_dir)
        if any(n.startswith(f"{topic}-0.") and n.endswith("-future") for n in names):
            return None
        parts = [tuple(p) for p in env.node(log_dir).call("partitions", timeout=30)]
        if (topic, 0) in parts:
            held.append(log_dir)
    return held or None
