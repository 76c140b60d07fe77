"""Fixtures of the cleaner tests: ``make_log`` builds logs on real files in tmp_path, driven by
the fake clock and scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.clock import FakeClock
from storage.scheduler import FakeScheduler
from tests.cleaner.kafka_logs import MakeLog, log_factory


@pytest.fixture
def make_log(tmp_path: Path, clock: FakeClock, scheduler: FakeScheduler) -> MakeLog:
    return log_factory(tmp_path, clock, scheduler)
