"""Shared test fixtures: a fake clock and scheduler, and small log factories on real files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pytest

from storage.clock import FakeClock
from storage.scheduler import FakeScheduler

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "kafka-real"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def scheduler(clock: FakeClock) -> FakeScheduler:
    return FakeScheduler(clock)


@pytest.fixture
def kafka_fixtures() -> Path:
    """The real Kafka log directories (read-only; copy before opening)."""
    if not FIXTURES.is_dir():
        pytest.fail(f"the Kafka fixtures are missing at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def copy_fixture(tmp_path: Path, kafka_fixtures: Path) -> Callable[[str], Path]:
    """Copy one fixture folder (relative to kafka-real/) into tmp_path and return the copy."""

    def copy(relative: str) -> Path:
        source = kafka_fixtures / relative
        target = tmp_path / "fixture" / relative
        shutil.copytree(source, target)
        for path in [target, *target.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return target
    return copy
