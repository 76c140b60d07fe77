"""``cluster-log-dirs``: every log directory of the cluster, kept in each of them, so that a start
without one of them can tell that one is missing (Kafka's controller knows a broker's directories
from its metadata log; Strata has no store besides the directories).

Layout: a text checkpoint (``storage.checkpoint.CheckpointFile``), version 0::

    0                                   version
    <count>                             entry lines that follow
    <node.id> <directory.id> <path>     one per directory, by node id

    Entry => NodeId: int32 >= 0 | DirectoryId: Kafka Uuid (22 base64url characters)
             | Path: the directory's absolute path when last seen, percent-encoded (no
               whitespace), for messages only: a directory is known by its directory.id

A malformed file raises ``CheckpointError`` naming the file and line. ``DirIdentity`` is what a
node reports of its directory: its ``meta.properties`` and this file (None when absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from node.meta_properties import MetaProperties, is_uuid, read_meta_properties
from storage import files
from storage.checkpoint import CheckpointFile

VERSION = 0


@dataclass(frozen=True)
class KnownDir:
    """One log directory of the cluster."""

    node_id: int
    directory_id: str
    path: str


@dataclass(frozen=True)
class DirIdentity:
    """What one directory says about itself (``read_identity``): ``meta`` is None for a
    directory never formatted, ``known`` None when it has no ``cluster-log-dirs``."""

    log_dir: str
    meta: MetaProperties | None
    known: tuple[KnownDir, ...] | None


class _KnownDirFormatter:
    def format(self, entry: KnownDir) -> str:
        return f"{entry.node_id} {entry.directory_id} {quote(entry.path, safe='/')}"

    def parse(self, fields: list[str]) -> KnownDir:
        if len(fields) != 3:
            raise ValueError(f"expected 3 fields, found {len(fields)}")
        node, directory_id, path = fields
        if not node.isascii() or not node.isdigit() or int(node) >= 2**31:
            raise ValueError(f"node id {node!r}")
        if not is_uuid(directory_id):
            raise ValueError(f"directory id {directory_id!r}")
        return KnownDir(int(node), directory_id, unquote(path))


def cluster_dirs_file(log_dir: Path) -> CheckpointFile[KnownDir]:
    return CheckpointFile(log_dir / files.CLUSTER_LOG_DIRS_FILE, VERSION, _KnownDirFormatter())


def read_cluster_dirs(log_dir: Path) -> tuple[KnownDir, ...] | None:
    try:
        return tuple(cluster_dirs_file(log_dir).read())
    except FileNotFoundError:
        return None


def write_cluster_dirs(log_dir: Path, known: tuple[KnownDir, ...]) -> None:
    cluster_dirs_file(log_dir).write(sorted(known, key=lambda k: k.node_id))


def read_identity(log_dir: Path) -> DirIdentity:
    """The identity files of ``log_dir`` (a directory not created yet has none)."""
    return DirIdentity(str(log_dir), read_meta_properties(log_dir), read_cluster_dirs(log_dir))
