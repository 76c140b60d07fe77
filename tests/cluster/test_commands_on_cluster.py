"""Every cluster subcommand through ``ops.cli.main.main`` in this process, against a cluster on the
session's Ray head (the subprocess path, with a head of its own, is test_cli_cluster.py)."""

from __future__ import annotations

import json

import pytest
import ray

from ops.cli import main as cli


def run(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    assert cli.main(list(args)) == code, capsys.readouterr()
    assert ray.is_initialized()          # the session's driver is left alone
    return capsys.readouterr().out


def test_topic_cleaner_and_status_commands(start_cluster, capsys, monkeypatch) -> None:
    c = start_cluster(dirs=2, cleaners=1)
    ns = f"--namespace={c.namespace}"
    created = json.loads(run(capsys, "topic", "create", "s", "--partitions=2", "--json", ns,
                             "--config=cleanup.policy=compact", "--config=segment.bytes=4096"))
    assert sorted(created["partitions"].values()) == sorted(c.description.log_dirs)
    run(capsys, "topic", "create", "s", ns, code=2)                      # exists: usage error
    run(capsys, "topic", "create", "plain", ns)
    assert json.loads(run(capsys, "cleaner", "pause", "s", "--partition=1", "--json", ns))[
        "paused"]
    explained = json.loads(run(capsys, "cleaner", "explain", "s", "--partition=1", "--json", ns))
    assert explained["topic_partition"] == "s-1" and explained["status"] == "paused"

    monkeypatch.setattr("sys.stdin", _Stdin("".join(f"k{i % 3}\tv{i}\n" for i in range(200))))
    produced = json.loads(run(capsys, "produce", "s", "--json", "--batch-bytes=1024", ns))
    assert produced["records"] == 200 and sum(produced["partitions"].values()) == 200
    monkeypatch.setattr("sys.stdin", _Stdin("x\n"))
    refused = run(capsys, "produce", "s", "--value-only", "--partition=0", "--json", ns, code=1)
    assert "without key" in json.loads(refused)["error"]

    assert json.loads(run(capsys, "cleaner", "resume", "s", "--partition=1", "--json", ns))[
        "resumed"]
    run(capsys, "cleaner", "resume", "s", "--partition=1", ns, code=1)   # not paused any more
    for p in range(2):
        run(capsys, "cleaner", "trigger", "s", f"--partition={p}", "--roll", "--wait", ns)
    lines = [json.loads(line) for line in run(capsys, "consume", "s", "--json", ns).splitlines()]
    assert sorted(r["key"] for r in lines) == ["k0", "k1", "k2"]       # compacted, both partitions
    text = run(capsys, "cleaner", "status", ns)
    assert "cleaners" in text and "last cleans" in text
    status = json.loads(run(capsys, "cluster", "status", "--json", ns))
    assert [t["name"] for t in status["topics"]] == ["plain", "s"]
    assert all(d["online"] for d in status["log_dirs"])
    assert "log directories" in run(capsys, "log-dirs", "describe", ns)
    assert "plain" in run(capsys, "topic", "list", ns)
    assert json.loads(run(capsys, "topic", "delete", "plain", "--json", ns))[
        "partitions_deleted"] == 1
    run(capsys, "consume", "nothere", ns, code=2)


class _Stdin:
    def __init__(self, text: str) -> None:
        import io

        self.buffer = io.BytesIO(text.encode())
