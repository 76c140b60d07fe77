"""``strata recover`` judges batches by their structure and CRC as recovery does, never by the
default ``max.message.bytes``: a legal 10 MiB batch is kept (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops.cli.main import main
from node import LogDir
from storage.config import LogConfig
from storage.log import Log
from storage.records import Record

MIB = 1024 * 1024


def test_recover_keeps_a_legal_10_mib_batch(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    config = LogConfig(max_message_bytes=12 * MIB, segment_bytes=64 * MIB)
    logdir = LogDir.open(logs, default_config=config, start_tasks=False)
    log = logdir.get_or_create_log("t", 0)
    log.append([Record(b"a", b"small", 1_000)])
    log.append([Record(b"b", b"x" * (10 * MIB), 1_001)])
    log.append([Record(b"c", b"after", 1_002)])
    logdir.close()
    segment = logs / "t-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    for args in (["--dry-run"], []):
        code = main(["recover", str(logs), "--json", *args])
        report = json.loads(capsys.readouterr().out)
        assert code == 0, report
        assert report["status"] == "healthy", report
    assert segment.stat().st_size == size
    reopened = Log.open(logs / "t-0", config)
    try:
        assert [r.key for r in reopened.read()] == [b"a", b"b", b"c"]
    finally:
        reopened.close()
