"""Progress of a long topic operation (a create or delete of thousands of partitions), shown while
the call runs: a rich bar on stderr when stderr is a terminal, else one line per stage on stderr
(``strata topic delete: delete partitions: 10000 partitions``), nothing with ``--json``.

The coordinator records (stage, done, total) of each create or delete as it goes
(``CoordinatorService.topic_progress``); ``run_with_progress`` runs the blocking client call on a
thread and polls that record.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

POLL_S = 0.25


def run_with_progress(cluster: Any, topic: str, action: str, call: Callable[[], T], *,
                      enabled: bool = True) -> T:
    """``call()``, its progress shown meanwhile (see the module docstring); returns its value or
    raises its error."""
    if not enabled:
        return call()
    from ops.tools.output import console

    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = call()
        except BaseException as err:  # noqa: BLE001 - raised in the caller's thread
            result["error"] = err
    worker = threading.Thread(target=target, name=f"strata-{action}", daemon=True)
    worker.start()
    err = console(stderr=True)
    show = _Bar(err) if err.is_terminal else _Lines(f"strata topic {action}")
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            show.update(_progress(cluster, topic))
        if "error" not in result:
            show.update(_progress(cluster, topic), final=True)
    finally:
        show.close()
    if "error" in result:
        raise result["error"]
    return result["value"]


def _progress(cluster: Any, topic: str) -> tuple[str, int, int] | None:
    try:
        return cluster.topic_progress(topic)
    except Exception:  # noqa: BLE001 - progress is a display; the call itself reports errors
        return None


class _Lines:
    """One line per stage, at its end (or at the end of the call)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.stage: tuple[str, int] | None = None
        self.last: tuple[str, int, int] | None = None

    def update(self, progress: tuple[str, int, int] | None, final: bool = False) -> None:
        if progress is None:
            return
        stage, done, total = progress
        if self.last is not None and self.last[0] != stage:
            self._say(self.last)
        self.last = progress
        if final:
            self._say(progress)
            self.last = None

    def _say(self, progress: tuple[str, int, int]) -> None:
        stage, done, total = progress
        print(f"{self.prefix}: {stage}: {done} of {total} partitions", file=sys.stderr,
              flush=True)

    def close(self) -> None:
        pass


class _Bar:
    def __init__(self, err: Any) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=err, transient=False)
        self.bar.start()
        self.tasks: dict[str, Any] = {}

    def update(self, progress: tuple[str, int, int] | None, final: bool = False) -> None:
        if progress is None:
            return
        stage, done, total = progress
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(stage, total=max(total, 1))
        self.bar.update(self.tasks[stage], completed=done, total=max(total, 1))

    def close(self) -> None:
        self.bar.stop()
