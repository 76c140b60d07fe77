"""Stray entries a failing disk, an operator or an attacker leaves in a partition directory, for
the stray-file tables of ``LogDir.open`` (tests/node/test_stray_files.py) and ``strata recover``
(tests/cluster/test_recover_stray.py), and a snapshot of a tree that can hold them."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from node import LogDir
from storage.config import LogConfig
from storage.records import Record

SEGMENT = "00000000000000000000.log"


def build_good_and_bad(path: Path, config: LogConfig, records: int) -> Path:
    """A log directory with partitions good-0 and bad-0, ``records`` one-record batches each
    (values ``good<i>``, ``bad<i>``), shut down cleanly; returns ``path``."""
    with LogDir.open(path, default_config=config, start_tasks=False) as d:
        for topic in ("good", "bad"):
            log = d.get_or_create_log(topic, 0)
            for i in range(records):
                log.append([Record(f"k{i}".encode(), f"{topic}{i}".encode(), 1_000 + i)])
    return path


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a hash for a regular file, the kind (``stat.filemode``) for
    anything else (reading a FIFO would block)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            found[str(path.relative_to(root))] = (
                hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(mode)
                else stat.filemode(mode))
    return found


def symlink_loop(partition: Path) -> None:
    """Two links named like segment files pointing at each other."""
    os.symlink("00000000000000000100.index", partition / "00000000000000000100.log")
    os.symlink("00000000000000000100.log", partition / "00000000000000000100.index")


def directory_as_segment(partition: Path, name: str = SEGMENT) -> None:
    (partition / name).unlink()
    (partition / name).mkdir()


def fifo_as_segment(partition: Path) -> None:
    (partition / SEGMENT).unlink()
    os.mkfifo(partition / SEGMENT)


def offset_beyond_int64(partition: Path) -> None:
    (partition / "99999999999999999999.log").write_bytes(b"")


def over_long_name(partition: Path) -> None:
    """A 25-digit segment name."""
    (partition / ("0" * 25 + ".log")).write_bytes(b"x")
