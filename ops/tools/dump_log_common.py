"""What every part of ``strata dump-log`` shares: file kinds, the options, the trailers printed after
the last file, and read-only access to a file."""

from __future__ import annotations

import argparse
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO


INT32_MAX = 2**31 - 1
KAFKA_MAX_MESSAGE_SIZE = 5 * 1024 * 1024       # Kafka's --max-message-size default (index check)
MAX_PROBLEMS_PER_FILE = 20
DECODERS = ("string", "hex", "msgpack", "none")
TOPIC_DECODERS = {"offsets": "ops.tools.group_records",
                  "transaction-log": "ops.tools.transaction_records"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
OFFSET_CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                      "cleaner-offset-checkpoint", "replication-offset-checkpoint")
EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"
KINDS = {".log": "log", ".checkpoint": "kraft-snapshot", ".index": "offset-index",
         ".timeindex": "time-index", ".snapshot": "producer-snapshot", ".txnindex": "txn-index"}


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of bytes")
    return value


@dataclass(frozen=True, slots=True)
class DumpOptions:
    print_data_log: bool = False
    deep_iteration: bool = False
    skip_record_metadata: bool = False
    index_sanity_check: bool = False
    verify_index_only: bool = False
    max_bytes: int | None = None
    key_decoder: str = "string"
    value_decoder: str = "string"
    json: bool = False
    verify: bool = False
    topic_decoder: str | None = None       # a key of TOPIC_DECODERS

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DumpOptions:
        topic = ("offsets" if args.offsets_decoder else             # Kafka's precedence
                 "transaction-log" if args.transaction_log_decoder else None)
        decoders_given = (args.key_decoder is not None or args.value_decoder is not None
                          or topic is not None)
        print_data = args.print_data_log or decoders_given       # as Kafka's decoder classes do
        return cls(print_data, args.deep_iteration or print_data, args.skip_record_metadata,
                   args.index_sanity_check, args.verify_index_only, args.max_bytes,
                   args.key_decoder or "string", args.value_decoder or "string", args.json,
                   args.verify, topic)


@dataclass
class Trailers:
    """What Kafka prints to stderr after the last file, and whether anything was damaged."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    timestamp_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    damaged_files: list[str] = field(default_factory=list)

    def write(self, err: TextIO) -> None:
        for name, pairs in self.index_mismatches.items():
            err.write(f"Mismatches in :{name}\n")
            err.writelines(f"  Index offset: {a}, log offset: {b}\n" for a, b in pairs)
        for name, pairs in self.timestamp_mismatches.items():
            err.write(f"Found timestamp mismatch in :{name}\n")
            err.writelines(f"  Index timestamp: {a}, log timestamp: {b}\n" for a, b in pairs)
        for name, pairs in self.out_of_order.items():
            err.write(f"Found out of order timestamp in :{name}\n")
            err.writelines(f"  Index timestamp: {a}, Previously indexed timestamp: {b}\n"
                           for a, b in pairs)
        for pairs in self.offsets_not_found.values():
            err.write("The following indexed offsets are not found in the log.\n")
            err.writelines(f"Indexed offset: {a}, found log offset: {b}\n" for a, b in pairs)
        for name, pairs in self.non_consecutive.items():
            err.write(f"Non-consecutive offsets in {name}\n")
            err.writelines(f"  {a} is followed by {b}\n" for a, b in pairs)


def file_kind(path: Path) -> str:
    """What a file holds, from its name (a temporary suffix is looked through)."""
    from storage import files

    name = files.strip_temp_suffix(path).name
    if name in OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if name == EPOCH_CHECKPOINT:
        return "epoch-checkpoint"
    return KINDS.get(name[name.rfind("."):] if "." in name else "", "unknown")


def _segment_base(path: Path) -> int | None:
    from storage import files

    return files.offset_from_file_name(path.name) if files.is_segment_file(path.name) else None


def _sibling(path: Path, suffix: str) -> Path:
    """The file of the same segment with ``suffix`` (``.log`` beside an index)."""
    return path.with_name(path.name.split(".", 1)[0] + suffix)


def read_only(path: Path) -> memoryview:
    """The file's bytes through a read-only map (empty for an empty file); never written."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    finally:
        os.close(fd)
