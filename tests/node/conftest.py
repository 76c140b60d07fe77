"""Fixtures of the log-directory tests: a LogDir factory on real files driven by a fake clock and
scheduler (closed at teardown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from node import LogDir, LogDirConfig
from storage.clock import FakeClock
from storage.config import LogConfig
from storage.scheduler import FakeScheduler

OpenDir = Callable[..., LogDir]

# every periodic task first runs at the first tick, then every second of fake time
FAST_TASKS = LogDirConfig(log_initial_task_delay_ms=0, log_retention_check_interval_ms=1000,
                          log_flush_scheduler_interval_ms=1000,
                          log_flush_offset_checkpoint_interval_ms=1000,
                          log_flush_start_offset_checkpoint_interval_ms=1000,
                          producer_id_expiration_check_interval_ms=1000)


@pytest.fixture
def open_dir(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> Iterator[OpenDir]:
    """``open_dir(path=tmp_path/"logs", **LogDir.open kwargs)`` with the fake clock and scheduler
    and FAST_TASKS unless given; every directory opened is closed at teardown."""
    opened: list[LogDir] = []

    def make(path: Path | None = None, **kwargs: Any) -> LogDir:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("scheduler", scheduler)
        kwargs.setdefault("config", FAST_TASKS)
        kwargs.setdefault("default_config", LogConfig())
        d = LogDir.open(path or tmp_path / "logs", **kwargs)
        opened.append(d)
        return d

    yield make
    for d in opened:
        d.close()
