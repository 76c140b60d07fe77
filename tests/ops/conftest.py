"""Fixtures of the drill tests: drill options at the small size the suite runs them with, and a
check that a test left no mount and no immutable file behind (``leftovers``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from ops.drills import DrillOptions

ATTRS = re.compile(r"^([-a-zA-Z]{10,})\s+(/.*)$")   # lsattr: flags, then the path


@pytest.fixture
def drill_options(ray_session: str, tmp_path: Path) -> Iterator[DrillOptions]:
    """Small drills on the session's Ray head; each starts (and stops) a Strata cluster of its own
    in a fresh namespace under ``tmp_path``."""
    options = DrillOptions(address=None, workdir=tmp_path, warmup_records=600,
                           after_records=160, timeout_s=90, sample_interval_s=0.5)
    yield options
    assert leftovers(tmp_path) == []


def leftovers(path: Path) -> list[str]:
    """What a drill must not leave under ``path``: mounts and immutable files."""
    found = [f"mount {line.split()[1]}" for line in Path("/proc/mounts").read_text().splitlines()
             if str(path) in line]
    flagged = subprocess.run(["lsattr", "-R", str(path)], capture_output=True, text=True)
    found += [f"immutable {m.group(2)}" for m in map(ATTRS.match, flagged.stdout.splitlines())
              if m and "i" in m.group(1)]
    return found
