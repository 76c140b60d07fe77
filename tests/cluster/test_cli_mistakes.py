"""Mistakes an operator makes with ``strata``, each through the real command (a process of its
own): one line on stderr naming what is wrong, no traceback, exit code 2 (usage) or 1 (problems),
and nothing started or changed where the command was refused. None of these starts Ray: the
refusals come before any Ray process exists (``--ray-temp-dir`` stays empty to prove it)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from ops.cli.main import build_parser
from node.lock import DirLock
from tests.cluster.test_recover import build_logdir
from tests.strata_cli import run_strata


def refused(result, *words: str) -> str:
    """The one stderr line of a refused command, checked to contain ``words``."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def start(tmp_path: Path, *args: str, code: int = 2):
    ray_tmp = tmp_path / "ray"
    ray_tmp.mkdir(exist_ok=True)
    result = run_strata("cluster", "start", "--no-dashboard", f"--ray-temp-dir={ray_tmp}",
                        *args, code=code)
    assert list(ray_tmp.iterdir()) == [], "a Ray head was started"
    return result


def test_cluster_start_on_a_log_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    refused(start(tmp_path, f"--log-dir={tmp_path / 'file'}"),
            f"{tmp_path / 'file'}", "not a directory")
    assert (tmp_path / "file").read_text() == "not a directory"


def test_cluster_start_on_a_log_dir_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    refused(start(tmp_path, f"--log-dir={tmp_path / 'file' / 'logs'}"),
            f"{tmp_path / 'file' / 'logs'}", "cannot be created", "Not a directory")


def test_the_same_log_dir_given_twice_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    refused(start(tmp_path, f"--log-dir={logs}", f"--log-dir={logs}/"), str(logs), "given twice")
    assert not logs.exists()


def test_a_log_dir_whose_lock_is_held_is_refused_at_once(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    lock = DirLock.acquire(logs)
    try:
        line = refused(start(tmp_path, f"--log-dir={logs}"), str(logs), "in use",
                       f"process {os.getpid()}")
    finally:
        lock.release()
    assert "already serves" in line


def test_server_properties_that_are_not_utf8_are_refused_naming_the_line(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_bytes(b"broker.id=0\nlog.dirs=/data/\xe9\n")
    refused(start(tmp_path, f"--config={config}"), str(config), "line 2", "not UTF-8")


def test_server_properties_with_an_unknown_key_are_refused_naming_line_and_key(
        tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"# Kafka's keys are fine\nbroker.id=0\nlisteners=PLAINTEXT://:9092\n"
                      f"log.dirs={tmp_path / 'logs'}\nlog.retention.hour 24\n")
    refused(start(tmp_path, f"--config={config}"), "line 5", "'log.retention.hour'")
    config.write_text(f"log.dirs={tmp_path / 'logs'}\nnum.partitons=3\n")
    refused(start(tmp_path, f"--config={config}"), "line 2", "'num.partitons'")
    assert not (tmp_path / "logs").exists()


def test_recover_dry_run_calls_a_cleanly_stopped_directory_healthy(tmp_path: Path) -> None:
    """A partition created and never written has an empty segment whose indexes the node
    creates when it first uses them (as Kafka's lazy indexes): nothing to repair."""
    from node import LogDir

    logs = build_logdir(tmp_path / "logs")
    logdir = LogDir.open(logs, start_tasks=False)
    logdir.get_or_create_log("empty", 0)
    logdir.close()
    assert not (logs / "empty-0" / "00000000000000000000.index").exists()
    result = run_strata("recover", str(logs), "--dry-run", "--json", code=0)
    report = json.loads(result.stdout)
    assert report["status"] == "healthy" and report["summary"]["partitions"] == 3


def test_recover_refuses_a_folder_that_is_not_a_log_directory(tmp_path: Path) -> None:
    build_logdir(tmp_path / "parent" / "logs-a")
    build_logdir(tmp_path / "parent" / "logs-b")
    before = sorted(p.name for p in (tmp_path / "parent").rglob("*"))
    for args in (["--dry-run"], []):
        refused(run_strata("recover", str(tmp_path / "parent"), *args, code=2),
                str(tmp_path / "parent"), "is not a log directory")
    assert sorted(p.name for p in (tmp_path / "parent").rglob("*")) == before


def test_every_option_and_argument_of_every_command_has_a_help_text() -> None:
    blank = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif not action.help:
                blank.append(" ".join([*path, *(action.option_strings or [action.dest])]))

    walk(build_parser(), ["strata"])
    assert blank == []


def test_help_says_what_status_shows_and_how_long_stats_samples() -> None:
    status = run_strata("cluster", "status", "--help").stdout
    assert "topic list" in status and "directories, cleaners and topics" not in status
    stats = " ".join(run_strata("stats", "--help").stdout.split())
    assert "how long to sample, in seconds (default 60)" in stats


def test_tables_written_to_a_file_keep_every_value_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped output is plain columns: a long partition name and message survive whatever
    COLUMNS says (rich used to cut them to "23…")."""
    logs = build_logdir(tmp_path / "logs")
    topic = "t" * 180
    (logs / f"{topic}-0").mkdir()
    (logs / f"{topic}-0" / "00000000000000000000.timeindex").write_bytes(b"")
    wide = run_strata("recover", str(logs), "--dry-run", code=1)
    monkeypatch.setenv("COLUMNS", "40")
    narrow = run_strata("recover", str(logs), "--dry-run", code=1)
    for out in (wide.stdout, narrow.stdout):
        assert "…" not in out
        assert f"{topic}-0/00000000000000000000.timeindex" in out


def test_an_unknown_flag_shows_the_sub_commands_usage_and_what_to_use_for_a_kafka_flag() -> None:
    for args, usage, flag, instead in (
            (["consume", "orders", "--group", "g1"], "usage: strata consume", "--group",
             "joins no consumer group"),
            (["consume", "orders", "--from-beginning"], "usage: strata consume",
             "--from-beginning", "--from-offset 0"),
            (["consume", "orders", "--bootstrap-server", "localhost:9092"],
             "usage: strata consume", "--bootstrap-server", "--address"),
            (["produce", "orders", "--bootstrap-server=localhost:9092"], "usage: strata produce",
             "--bootstrap-server", "--namespace"),
            (["topic", "create", "orders", "--replication-factor", "3"],
             "usage: strata topic create", "--replication-factor", "no replication")):
        result = run_strata(*args, code=2)
        assert result.stderr.startswith(usage), result.stderr
        error = result.stderr.strip().splitlines()[-1]
        assert error.startswith(f"{usage[7:]}: error: unrecognized arguments: {flag}"), error
        assert f"{flag}: " in error and instead in error, error
    plain = run_strata("log-dirs", "describe", "--no-such-flag", code=2).stderr
    assert plain.startswith("usage: strata log-dirs describe")
    assert plain.strip().splitlines()[-1] == ("strata log-dirs describe: error: unrecognized "
                                              "arguments: --no-such-flag")
