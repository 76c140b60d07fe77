"""A process that owns a log directory, for the lock and kill -9 tests.

    python -m tests.node._child hold DIR
        open DIR, print "locked <pid>", then wait for stdin to close (or a kill).
    python -m tests.node._child produce DIR PARTITIONS
        open DIR with PARTITIONS partitions of topic "t" and loop forever: append one batch of 10
        records (value "<partition>:<offset>") to every partition, flush all, checkpoint, and
        print "flushed <end offset of each partition, space separated>"; every third round the
        appends are left unflushed (and printed as "unflushed ...") so a kill finds data past the
        recovery point.
"""

from __future__ import annotations

import os
import sys

from node import LogDir
from storage.config import LogConfig
from storage.records import Record


def hold(path: str) -> None:
    d = LogDir.open(path)
    print(f"locked {os.getpid()}", flush=True)
    sys.stdin.read()
    d.close()


def produce(path: str, partitions: int) -> None:
    d = LogDir.open(path, default_config=LogConfig(segment_bytes=4096), recovery_threads=2)
    logs = [d.get_or_create_log("t", p) for p in range(partitions)]
    print("ready", flush=True)
    round_ = 0
    while True:
        for p, log in enumerate(logs):
            start = log.log_end_offset
            log.append([Record(key=str(start + i).encode(), value=f"{p}:{start + i}".encode(),
                               timestamp=1_700_000_000_000) for i in range(10)])
        round_ += 1
        if round_ % 3 == 0:
            print("unflushed", flush=True)
            continue
        for log in logs:
            log.flush()
        d.checkpoint()
        print("flushed " + " ".join(str(log.log_end_offset) for log in logs), flush=True)


if __name__ == "__main__":
    command, directory, *rest = sys.argv[1:]
    if command == "hold":
        hold(directory)
    elif command == "produce":
        produce(directory, int(rest[0]))
    else:
        raise SystemExit(f"unknown command {command}")
