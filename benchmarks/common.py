"""Shared helpers of the benchmarks: a figure, a timer, and the raw file baselines."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Figure:
    """One measured figure. ``baseline`` is the raw operation on the same bytes in the same run."""

    name: str
    value: float
    unit: str
    target: float | None = None         # the goal, in ``unit``
    baseline: float | None = None       # same unit as value
    baseline_name: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline if self.baseline else None

    @property
    def meets_target(self) -> bool | None:
        return None if self.target is None else self.value >= self.target


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    """The shortest wall time of ``repeats`` runs of ``fn`` (seconds)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def raw_write_seconds(path: Path, chunks: list[bytes]) -> float:
    """Plain buffered write of the chunks to a new file (no fsync): the write baseline."""
    start = time.perf_counter()
    with open(path, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
    elapsed = time.perf_counter() - start
    return elapsed


def raw_read_seconds(path: Path, chunk_size: int = 1 << 20) -> float:
    """Plain sequential read of a file in page cache: the read baseline."""
    start = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.read(fd, chunk_size):
            pass
    finally:
        os.close(fd)
    return time.perf_counter() - start


MB = 1_000_000
