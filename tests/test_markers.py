"""The slow marker: every module the quick loop leaves out exists (a renamed module would
otherwise silently move into the quick loop)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SLOW_MODULES


def test_every_slow_module_exists() -> None:
    root = Path(__file__).resolve().parent.parent
    assert sorted(m for m in SLOW_MODULES if not (root / m).is_file()) == []
