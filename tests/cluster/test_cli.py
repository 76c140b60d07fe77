"""The ``strata`` entry point: subcommands from the registry, exit codes, ``python -m ops.cli``
in a real subprocess, and a startup that loads neither ray nor numba."""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path

import pytest

from ops.cli import main as cli
from ops.tools import UsageError
from storage.records import Record, build_batch

ROOT = Path(__file__).resolve().parents[2]


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_help_lists_every_registered_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "dump-log" in out and "recover" in out


def test_a_module_in_the_registry_adds_its_subcommand(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    module = types.ModuleType("tests_fake_command")

    def run(args: argparse.Namespace) -> int:
        if args.fail:
            raise UsageError("nothing to greet")
        print(f"hello {args.name}")
        return 0

    def register(subparsers: argparse._SubParsersAction) -> None:
        parser = subparsers.add_parser("hello", help="say hello")
        parser.add_argument("name")
        parser.add_argument("--fail", action="store_true")
        parser.set_defaults(handler=run)

    module.register = register          # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests_fake_command", module)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "tests_fake_command"))
    assert cli.main(["hello", "ada"]) == 0
    assert capsys.readouterr().out == "hello ada\n"
    assert cli.main(["hello", "ada", "--fail"]) == 2
    assert capsys.readouterr().err == "strata hello: error: nothing to greet\n"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no-such-command"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    assert cli.main(["dump-log"]) == 2
    assert "strata dump-log: error: no files given" in capsys.readouterr().err


def test_python_m_cluster_cli_dumps_a_segment_in_a_subprocess(tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(build_batch([Record(b"k", b"v", 1000)], partition_leader_epoch=0))
    result = run_module("-m", "ops.cli", "dump-log", "--print-data-log", str(segment))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == ("| offset: 0 CreateTime: 1000 keySize: 1 "
                                              "valueSize: 1 sequence: -1 headerKeys: [] key: k "
                                              "payload: v")
    result = run_module("-m", "ops.cli", "dump-log", "--verify", str(segment) + ".missing")
    assert result.returncode == 2 and "not a file" in result.stderr


def test_startup_imports_neither_ray_nor_numba() -> None:
    probe = ("import sys\n"
             "from ops.cli import main as cli\n"
             "cli.build_parser()\n"
             "heavy = {'ray', 'pyspark', 'numba', 'storage', 'node'}\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n")
    result = run_module("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", (
        "a subcommand module imports heavy packages at module level; import them inside its "
        "run() (see ops/cli/main.py)")
    result = run_module("-m", "ops.cli", "--help")
    assert result.returncode == 0 and "dump-log" in result.stdout


# what a command that talks to a running cluster loads besides ray: the client, the actor classes
# (``ray.get_actor`` loads an actor's class in the caller) and the modules of the answers it
# unpickles (status, topics, partitions, records, errors)
CLIENT_SIDE = ("ops.cli.main", "ops.cli.lifecycle", "ops.cli.topics", "ops.cli.consume",
               "ops.cli.produce", "ops.tools.output", "cluster.client.client",
               "cluster.runtime.actors", "cluster.status", "cluster.metadata.topics",
               "cluster.errors", "node.stats", "node.errors", "storage.record_format",
               "storage.errors",
               # a small produce: routed by the interpreted hash, encoded by the node
               "cluster.client.murmur", "cluster.client.data_path", "storage.batching",
               "storage.append_info")
HEAVY = ("numba", "numpy", "cleaner.cleaner", "cleaner.kernels", "storage.log", "storage.records",
         "node.server", "node.logdir", "cluster.cleaning.coordinator",
         "cluster.runtime.actor_bodies", "pyspark", "rich")


def test_the_client_and_the_answers_of_common_commands_load_no_numba_cleaner_or_spark() -> None:
    """Issue 15: ``strata cluster status``/``topic describe``/``consume`` answer in well under a
    second; numba, numpy, the cleaner and the directory code cost half a second to import, so
    none of what those commands import may pull them in."""
    probe = ("import importlib, sys\n"
             f"for name in {CLIENT_SIDE!r}:\n"
             "    importlib.import_module(name)\n"
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n")
    result = run_module("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_deferred_module_loads_on_first_use_and_not_on_import() -> None:
    """``ops.cli.defer_imports`` (what ``strata`` does for the modules ``import ray`` imports and
    a command never uses): ray imports, the deferred modules stay unloaded, and a use of one
    gets the real module, through references taken before too."""
    probe = ("import sys\n"
             "from ops.cli import RAY_DEFERRABLE, defer_imports\n"
             "defer_imports(RAY_DEFERRABLE)\n"
             "import ray\n"
             "loaded = [m for m in ('requests', 'urllib3', 'jsonschema', 'attrs', 'yaml')\n"
             "          if m in sys.modules and type(sys.modules[m]).__name__ != 'DeferredModule']\n"
             "import yaml\n"
             "early = sys.modules['requests']\n"
             "print(loaded, yaml.safe_load('a: 1'), early.codes.ok,\n"
             "      type(sys.modules['requests']).__name__)\n")
    result = run_module("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]", "{'a':", "1}", "200", "module"]


def test_what_rays_driver_prints_goes_to_stderr_and_stdout_holds_the_commands_output() -> None:
    """A command's Ray driver prints the errors the cluster publishes ("(raylet) Task ... will
    be retried") through Ray's ``print_to_stdstream``, to stdout; after
    ``ray_messages_to_stderr`` (run where the CLI starts a driver) they go to stderr, so a
    ``--json`` document or consumed records are all that stdout holds."""
    probe = ("from ops.cli import ray_messages_to_stderr\n"
             "from ray._private import worker\n"
             "ray_messages_to_stderr()\n"
             "ray_messages_to_stderr()\n"
             "worker.print_to_stdstream({'lines': ['Task x will be retried'], 'pid': 'raylet',\n"
             "                           'is_err': False}, ignore_prefix=False)\n"
             "print('{\"ours\": 1}')\n")
    result = run_module("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"ours": 1}\n'
    assert result.stderr.count("Task x will be retried") == 1


def test_the_console_script_runs_when_installed() -> None:
    script = Path(sys.executable).with_name("strata")
    if not script.exists():
        pytest.skip("the strata console script is not installed (run scripts/setup)")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "recover" in result.stdout
