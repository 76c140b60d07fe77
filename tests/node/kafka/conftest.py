"""Fixtures of the Kafka protocol tests: a real ``LogDir`` on tmp_path served by a real
``KafkaServer`` on 127.0.0.1 with an ephemeral port (both closed at teardown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

from node import LogDir, LogDirOfflineError
from node.kafka.config import KafkaServerConfig
from node.kafka.server import KafkaServer

Serve = Callable[..., KafkaServer]


@pytest.fixture
def logdir(tmp_path: Path) -> Iterator[LogDir]:
    """A log directory with no background tasks (closed at teardown)."""
    d = LogDir.open(tmp_path / "logs", start_tasks=False)
    yield d
    if not d.closed:
        d.close()


@pytest.fixture
def serve(logdir: LogDir) -> Iterator[Serve]:
    """``serve(**properties)`` starts a server over ``logdir`` (``listeners`` on loopback port
    0 unless given; ``dotted``: keys with underscores of their own, taken as they are); every
    server started is closed at teardown."""
    started: list[KafkaServer] = []

    def start(directory: LogDir | None = None, dotted: Mapping[str, str] | None = None,
              **properties: Any) -> KafkaServer:
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", **(dotted or {})}
        props.update({key.replace("_", "."): value for key, value in properties.items()})
        server = KafkaServer(directory or logdir, KafkaServerConfig.from_properties(props))
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def server(serve: Serve) -> KafkaServer:
    """A server over ``logdir`` with the default settings."""
    return serve()


def take_offline(logdir: LogDir, topic: str, partition: int, aside: Path) -> None:
    """Take ``logdir`` offline for real: the directory of ``topic``-``partition`` (a partition
    holding records) is moved to ``aside`` and a file put in its place, so the log's next roll
    fails with an ``OSError``."""
    log = logdir.log(topic, partition)
    name = f"{topic}-{partition}"
    (logdir.path / name).rename(aside / f"{name}-gone")
    (logdir.path / name).write_text("not a directory")
    with pytest.raises(LogDirOfflineError):
        log.roll()
