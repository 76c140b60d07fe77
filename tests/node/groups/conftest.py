"""Fixtures of the group coordinator tests: a coordinator on a real log (``Harness``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.clock import FakeClock
from tests.node.groups.harness import Harness


@pytest.fixture
def groups(tmp_path: Path, clock: FakeClock) -> Iterator[Harness]:
    """A coordinator holding the partition of ``harness.GROUP``, closed at teardown."""
    harness = Harness(tmp_path / "logs", clock)
    yield harness
    harness.coordinator.close()
