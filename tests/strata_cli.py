"""``strata`` as a user runs it, against a Ray cluster that was there before it.

``run_strata`` runs ``python -m ops.cli`` (what the ``strata`` console script calls) in a
process of its own, with ``RAY_ADDRESS`` emptied: only ``--address`` names the Ray cluster.
``start_head`` is a Ray head started the way a user starts one before ``strata cluster start
--address``: in processes of its own (``cluster.runtime.head.start_head_process``, the helper
``strata cluster start`` uses), declaring no log directory (nobody had chosen them yet), on free
ports and in a temp dir of its own, so it runs beside the session's Ray cluster of the test process
and beside another test run on the host. ``stop_head`` stops exactly that head and returns the
processes of it still alive (none, normally).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from cluster.runtime.head import HeadProcess, head_processes, start_head_process, stop_head_process

ROOT = Path(__file__).resolve().parents[1]
_namespaces = itertools.count()
STOP_GRACE_S = 1.0   # the Strata actors have closed their directories (or the test failed)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique_namespace(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_namespaces)}"


def run_strata(*args: str, stdin: str | None = None, code: int | None = 0,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``strata ARGS`` in a process of its own; asserts its exit code unless ``code`` is None."""
    env = {**os.environ, "RAY_ADDRESS": ""}
    result = subprocess.run([sys.executable, "-m", "ops.cli", *args], cwd=ROOT, env=env,
                            input=stdin, capture_output=True, text=True, timeout=timeout)
    if code is not None:
        assert result.returncode == code, (args, result.stdout[-2000:], result.stderr[-4000:])
    return result


def start_head() -> HeadProcess:
    temp_dir = tempfile.mkdtemp(prefix="strata-head-", dir="/tmp")   # short: Ray's socket paths
    try:
        return start_head_process(
            [], include_dashboard=False, port=free_port(), metrics_export_port=free_port(),
            temp_dir=temp_dir, num_cpus=2,
            extra_args=[f"--ray-client-server-port={free_port()}",
                        f"--dashboard-agent-listen-port={free_port()}"])
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise


def live_processes(head: HeadProcess) -> list[psutil.Process]:
    alive = []
    for proc in head_processes(head.session_dir, head.address):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            continue
    return alive


def stop_head(head: HeadProcess, *, timeout_s: float = 15.0) -> list[psutil.Process]:
    """Stop the head (the Strata actors on it die with it); the processes of it still alive
    ``timeout_s`` later (SIGKILLed once more, so a failed check leaves nothing running)."""
    stop_head_process(head.session_dir, head.address, grace_s=STOP_GRACE_S)
    deadline = time.monotonic() + timeout_s
    while (left := live_processes(head)) and time.monotonic() < deadline:
        time.sleep(0.1)   # SIGKILLed: gone as soon as the kernel has torn them down
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    if head.temp_dir is not None:
        shutil.rmtree(head.temp_dir, ignore_errors=True)
    return left
