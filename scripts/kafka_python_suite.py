"""Run part of kafka-python's own integration suite against a Strata broker (``scripts/kafka-python-suite``).

kafka-python's integration tests take an external broker when ``KAFKA_URI`` is set. This fetches
the source release of the installed kafka-python from the package index (once, into
``.cache/``), serves a fresh log directory over the Kafka protocol on an ephemeral port (topics
created on first use with 4 partitions, as the suite's own broker fixture is configured; session
timeouts from 1 s, which the suite's group test uses), runs
the producer, consumer and admin integration tests against it, and prints each test's outcome
and the totals.

The source release leaves out two files of the suite's harness: ``test/__init__.py`` (written
empty, so that ``test`` is the suite's package and not the standard library's) and
``test/service.py``, whose ``ExternalService`` (a broker someone else runs: nothing to start or
stop) is all an external run uses; it is written here, and spawning a broker is refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUITES = ("test/integration/test_producer_integration.py",
          "test/integration/test_consumer_integration.py",
          "test/integration/test_admin_integration.py")
CLAIMED_KAFKA_VERSION = "4.0.0"   # the schemas the server's codec holds (Kafka 4.x)
TEST_TIMEOUT_S = 60
SERVICE_ADAPTER = '''"""What an external-broker run of the integration suite needs of its harness's services."""


class ExternalService:
    """A broker run by someone else: nothing to start, stop or wait for."""

    def __init__(self, host, port):
        self.host = host
        self.port = port

    def open(self):
        pass

    def close(self):
        pass

    def start(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True


class SpawnedService:
    """Spawning a broker is not part of this run."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("this run takes the external broker given by KAFKA_URI")
'''


def suite_source() -> Path:
    """The extracted source release of the installed kafka-python, with the harness completed."""
    import kafka

    version = kafka.__version__
    target = ROOT / ".cache" / f"kafka_python-{version}"
    if not (target / "test" / "integration").is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as download:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--no-binary", ":all:", f"kafka-python=={version}", "-d", download],
                           check=True)
            archive = next(Path(download).glob("kafka_python-*.tar.gz"))
            with tarfile.open(archive) as tar:
                tar.extractall(target.parent, filter="data")
    (target / "test" / "__init__.py").touch()
    (target / "test" / "service.py").write_text(SERVICE_ADAPTER)
    return target


def main(argv: list[str]) -> int:
    from node import LogDir
    from node.kafka.config import KafkaServerConfig
    from node.kafka.server import KafkaServer

    source = suite_source()
    with tempfile.TemporaryDirectory(prefix="strata-kafka-python-") as tmp:
        logdir = LogDir.open(Path(tmp) / "logs")
        # test_group asks for a 3 s session timeout, below Kafka's default
        # group.min.session.timeout.ms (6 s), which a default broker answers
        # INVALID_SESSION_TIMEOUT
        config = KafkaServerConfig.from_properties({
            "listeners": "PLAINTEXT://127.0.0.1:0", "auto.create.topics.enable": "true",
            "num.partitions": "4", "group.min.session.timeout.ms": "1000"})
        try:
            with KafkaServer(logdir, config) as server:
                report = Path(tmp) / "report.xml"
                # KAFKA_ROOT: the harness wants a Kafka installation's directory to exist, even
                # for an external broker; an empty one does
                env = {**os.environ, "KAFKA_URI": f"kafka://{server.bootstrap_servers}",
                       "KAFKA_VERSION": CLAIMED_KAFKA_VERSION, "PYTHONPATH": str(source),
                       "KAFKA_ROOT": tmp}
                print(f"kafka-python's integration suite ({source.name}) against "
                      f"{server.bootstrap_servers}", flush=True)
                # a test that hangs (a consumer group waiting for a coordinator) fails by
                # SIGALRM after TEST_TIMEOUT_S; the suite's own thread method would end the run
                ran = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                      "-q", f"--timeout={TEST_TIMEOUT_S}",
                                      "--timeout-method=signal", f"--junitxml={report}",
                                      *SUITES, *argv],
                                     cwd=source, env=env, capture_output=True, text=True,
                                     check=False)
                if not report.exists():
                    print(ran.stdout[-3000:], ran.stderr[-3000:], sep="\n")
                    return 2
                outcomes = read_outcomes(report)
        finally:
            logdir.close()
    for name, (outcome, message) in sorted(outcomes.items()):
        print(f"{outcome:8} {name}" + (f"  -- {message}" if message else ""))
    totals = Counter(outcome for outcome, _ in outcomes.values())
    print(", ".join(f"{count} {outcome}" for outcome, count in sorted(totals.items())))
    return 0 if outcomes and not totals["failed"] and not totals["error"] else 1


def read_outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """Each test case of the JUnit report: (outcome, the first line of its message)."""
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = (found.get("message") or "").splitlines()[0][:160] if found.get(
                    "message") else ""
                break
        outcomes[name] = (outcome, message)
    return outcomes


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
