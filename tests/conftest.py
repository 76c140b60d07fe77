"""Shared test fixtures: a fake clock and scheduler, small log factories on real files, the
session's Ray cluster (``ray_session``), a Ray head of its own per module (``ray_head``) and
small tmpfs mounts (``tmpfs``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

from storage.clock import FakeClock
from storage.scheduler import FakeScheduler

if TYPE_CHECKING:
    from cluster.runtime.head import HeadProcess

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kafka-real"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def scheduler(clock: FakeClock) -> FakeScheduler:
    return FakeScheduler(clock)


@pytest.fixture
def kafka_fixtures() -> Path:
    """The real Kafka log directories (read-only; copy before opening)."""
    if not FIXTURES.is_dir():
        pytest.fail(f"the Kafka fixtures are missing at {FIXTURES}")
    return FIXTURES


@pytest.fixture
def copy_fixture(tmp_path: Path, kafka_fixtures: Path) -> Callable[[str], Path]:
    """Copy one fixture folder (relative to kafka-real/) into tmp_path and return the copy."""

    def copy(relative: str) -> Path:
        source = kafka_fixtures / relative
        target = tmp_path / "fixture" / relative
        shutil.copytree(source, target)
        for path in [target, *target.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return target
    return copy


# ---- one Ray cluster for the whole session (STYLE.md P14; Ray costs 3-5 s to start) -----------
# another port lets two sessions run side by side on one host (two engineers' test runs)
RAY_METRICS_PORT = int(os.environ.get("STRATA_TEST_RAY_METRICS_PORT", "18311"))


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray head started in this process for the whole session, with metrics exported on
    ``RAY_METRICS_PORT`` every second; shut down (every process of it) at the end of the session.
    Any test module may use it (the cluster tests do; Spark tests can join it with
    ``ray.init(address="auto")`` from executors). Yields the head's address."""
    import ray

    from cluster.runtime.head import head_system_config

    if ray.is_initialized():
        pytest.fail("Ray is already initialised in this process")
    context = ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING",
                       log_to_driver=False, _metrics_export_port=RAY_METRICS_PORT,
                       _system_config=head_system_config(metrics_report_interval_ms=1000))
    try:
        yield context.address_info["address"]
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_head() -> Iterator[HeadProcess]:
    """A Ray head in processes of its own for one test module, started as a user starts one
    before ``strata cluster start --address`` (``tests.strata_cli.start_head``: free ports, no log
    directory declared); stopped at the end of the module, also when a test failed, and checked
    to leave no process behind."""
    from tests.strata_cli import start_head, stop_head

    head = start_head()
    try:
        yield head
    finally:
        left = stop_head(head)
        assert not left, f"the Ray head left processes behind: {[p.pid for p in left]}"


class Immutable:
    """``chattr +i``: even root can no longer write the file or create in the directory."""

    def __init__(self) -> None:
        self.marked: list[Path] = []

    def __call__(self, path: Path) -> None:
        result = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"chattr +i does not work here: {result.stderr.strip()}")
        self.marked.append(path)

    def clear(self) -> None:
        while self.marked:
            subprocess.run(["chattr", "-i", str(self.marked.pop())], capture_output=True)


@pytest.fixture
def immutable() -> Iterator[Immutable]:
    """Marks paths immutable (lost write permission); cleared at teardown at the latest."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    marks = Immutable()
    yield marks
    marks.clear()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``tmpfs("2m")`` mounts a tmpfs of that size and returns its path; unmounted at teardown
    (after the test closed what it opened there)."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        target = tmp_path / f"mnt{len(mounted)}"
        target.mkdir()
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                 str(target)], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or 'not root?'}); "
                        "this test needs one")
        mounted.append(target)
        return target

    yield mount
    for target in reversed(mounted):
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


# Long-running scenario modules (kill -9 loops, drills, multi-process and CLI end-to-end runs,
# model-based tests): `./scripts/test -m "not slow"` leaves them out for a quick loop; the full
# `./scripts/test` (CI) runs them.
SLOW_MODULES = frozenset({
    "tests/ops/test_drills.py",
    "tests/cluster/test_two_nodes.py",
    "tests/cluster/test_cli_cluster.py",
    "tests/cluster/test_cli_kafka_brokers.py",
    "tests/cluster/test_cli_cluster_mistakes.py",
    "tests/cluster/test_topic_verbs.py",
    "tests/cluster/test_cli_scale.py",
    "tests/cluster/test_cli_operator.py",
    "tests/ops/test_prometheus.py",
    "tests/storage/test_crash.py",
    "tests/storage/test_transactions_model.py",
    "tests/storage/test_log_model.py",
    "tests/node/groups/test_group_model.py",
    "tests/cleaner/test_compaction.py",
    # end to end through a Spark JVM and Strata clusters (minutes together)
    "tests/spark/test_sources.py",
    "tests/spark/test_stream.py",
    "tests/spark/test_atomic_writes.py",
    "tests/spark/test_streaming_sink.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parent.parent
    for item in items:
        if item.path.resolve().relative_to(root).as_posix() in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


# ---- hypothesis profiles: "ci" by default, "deep" with ./scripts/test --deep -------------------
# The stateful model test (tests/storage/test_log_model.py) takes its example and step counts from
# the loaded profile; every other hypothesis test sets its own max_examples.
settings.register_profile(
    "ci", max_examples=80, stateful_step_count=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])
settings.register_profile(
    "deep", max_examples=1000, stateful_step_count=100, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])
settings.load_profile(os.environ.get("STRATA_HYPOTHESIS_PROFILE", "ci"))
