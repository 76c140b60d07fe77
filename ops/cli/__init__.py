"""Subcommands of ``strata`` that talk to a running cluster (``cluster start|status|stop``,
``topic``, ``produce``, ``consume``, ``log-dirs``, ``cleaner``), listed in ``ops.cli.main.COMMANDS``
like the offline tools of ``ops.tools``.

The helpers here are shared by those modules. Importing this package stays cheap (``strata --help``
imports every command module): ray, rich, storage and the client are imported inside the helpers
that need them.

Every command takes ``--address`` (a Ray address; default: ``RAY_ADDRESS``, else the cluster on
this host), ``--namespace`` (the Strata cluster on that Ray cluster) and ``--json`` (one JSON
document on stdout instead of tables).
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import enum
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ops.tools import UsageError

if TYPE_CHECKING:
    from cluster.client.client import Cluster

DEFAULT_NAMESPACE = "strata"          # cluster.naming.DEFAULT_NAMESPACE, without importing it
_driver_started = False               # connect() (or leave_driver) left a Ray driver to the exit
_exit_when_done = False               # ops.cli.main.entry ends the process after the command
# imported by ``import ray`` at its top level, used only inside functions a command never
# reaches (TPU detection, usage stats, runtime-env schemas): loaded on first use instead
RAY_DEFERRABLE = ("requests", "jsonschema", "yaml")


def add_common_args(parser: argparse.ArgumentParser, *, json_help: str | None = None) -> None:
    parser.add_argument("--address", default=None,
                        help="Ray address of the cluster (default: RAY_ADDRESS, else the Ray "
                             "cluster running on this host)")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE,
                        help=f"the Strata cluster's Ray namespace (default {DEFAULT_NAMESPACE})")
    parser.add_argument("--json", action="store_true",
                        help=json_help or "print one JSON document instead of tables")


def connect(args: argparse.Namespace) -> Cluster:
    """The running cluster named by ``--address``/``--namespace``; a ``UsageError`` when there is
    none."""
    if "ray" not in sys.modules:
        defer_imports(RAY_DEFERRABLE)
    import ray

    from cluster.client.client import Cluster
    from cluster.errors import ClusterNotRunningError

    global _driver_started
    _driver_started = _driver_started or not ray.is_initialized()
    if _driver_started:
        lean_serialization()
        ray_messages_to_stderr()
    try:
        return Cluster.connect(args.address or "auto", namespace=args.namespace)
    except ClusterNotRunningError as err:
        raise UsageError(f"{err} (start one with `strata cluster start`)") from None


def lean_serialization() -> None:
    """Skip, in this command's own Ray driver, Ray's registration of serializers for pydantic
    models, Starlette state and Arrow tables (``ray.util.serialization_addons.apply``, run at
    the driver's first remote call): it imports pydantic and pyarrow, about half a second of
    every command, and the CLI sends and receives none of them (only Strata's dataclasses, bytes
    and builtins). Actors and other drivers keep Ray's full set."""
    try:
        from ray.util import serialization_addons
    except ImportError:       # a Ray without the hook: nothing to skip, the command still works
        return
    serialization_addons.apply = lambda context: None


def ray_messages_to_stderr() -> None:
    """Send what Ray prints in this command's own driver to stderr, so that stdout holds the
    command's output alone (a ``--json`` document, consumed records). Ray's driver prints the
    errors the cluster publishes, e.g. "(raylet) Task ... will be retried", to stdout through
    ``ray._private.worker.print_to_stdstream``, even with ``log_to_driver=False``. A Ray without
    that function: nothing to redirect, the command still works."""
    try:
        from ray._private import worker
    except ImportError:
        return
    original = getattr(worker, "print_to_stdstream", None)
    if original is None or getattr(original, "strata_to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.strata_to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr


def defer_imports(names: tuple[str, ...]) -> None:
    """Put a ``DeferredModule`` in ``sys.modules`` for each module of ``names`` not imported yet:
    code that imports it and never uses it no longer pays for it; code that uses it gets the
    real module then. (``importlib.util.LazyLoader`` does not help: on Python 3.11 a second
    ``import`` of a lazy module reads its ``__spec__`` and so loads it.)"""
    import importlib.util

    for name in names:
        if name not in sys.modules and importlib.util.find_spec(name) is not None:
            sys.modules[name] = DeferredModule(name)


class DeferredModule(types.ModuleType):
    """Stands for the module ``name`` until an attribute other than its name, spec or loader is
    read: then the real module is imported (it replaces this one in ``sys.modules``) and every
    read is answered by it, so references taken before (``import requests`` at the top of a
    module) keep working."""

    def __init__(self, name: str) -> None:
        import importlib.util

        super().__init__(name)
        self.__spec__ = importlib.util.find_spec(name)
        self.__loader__ = self.__spec__.loader if self.__spec__ else None

    def __getattr__(self, attr: str) -> Any:   # only for attributes this stand-in lacks
        import importlib

        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)       # later reads find the real names here
        return getattr(real, attr)


def topic_partition(text: str) -> tuple[str, int]:
    """``orders-3`` -> ("orders", 3) (the topic may contain dashes); the partition is an int32."""
    from storage.errors import InvalidTopicError
    from storage.files import partition_from_text

    topic, sep, partition = text.rpartition("-")
    try:
        if not sep or not topic:
            raise InvalidTopicError("no dash", topic=topic)
        return topic, partition_from_text(partition, topic)
    except InvalidTopicError:
        raise UsageError(f"{text!r} is not TOPIC-PARTITION (e.g. orders-0)") from None


def partition_number(text: str) -> int:
    """argparse type of ``--partition``: a partition number Kafka can hold, in [0, 2**31)."""
    from storage.files import partition_from_text

    return _argument(text, partition_from_text)


def partition_count(text: str) -> int:
    """argparse type of ``--partitions``: a count of partitions, in [1, 2**31)."""
    from storage.files import validate_partition_count

    return _argument(text, lambda t: validate_partition_count(_digits(t)))


def offset_number(text: str) -> int:
    """argparse type of an offset argument: an int64 >= 0."""
    from storage.files import validate_offset

    return _argument(text, lambda t: validate_offset(_digits(t), "offset"))


def _digits(text: str) -> int | str:
    """``text`` as an int when it is ASCII decimal digits, else unchanged (then refused as not
    an integer): argparse's ``int`` would take ``1_0``, `` 5`` and other scripts' digits."""
    return int(text) if text.isascii() and text.isdigit() else text


def _argument(text: str, parse: Callable[[str], int]) -> int:
    from storage.errors import StorageError

    try:
        return parse(text)
    except StorageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_config(pairs: list[str] | None) -> dict[str, str]:
    """``["cleanup.policy=compact", ...]`` -> a dict of Kafka keys."""
    config: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--config takes KEY=VALUE, got {pair!r}")
        config[key.strip()] = value.strip()
    return config


def jsonable(value: Any) -> Any:
    """Plain JSON values of snapshots: dataclasses and NamedTuples become objects, a
    ``TopicPartition`` its ``topic-partition`` name, enums their value, bytes text (or
    ``{"base64": ...}`` when they are not UTF-8)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if type(value).__name__ == "TopicPartition":
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):   # a NamedTuple: an object too
        return {name: jsonable(getattr(value, name)) for name in value._fields}
    if isinstance(value, Mapping):
        return {str(jsonable(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return text_or_base64(bytes(value))
    if isinstance(value, Path):
        return str(value)
    return str(value)


def text_or_base64(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def disconnect() -> None:
    """End the Ray driver ``connect`` started (the cluster keeps running); a driver that was
    there before, such as a test session's, stays. Under ``ops.cli.main.entry`` the driver is
    left for the process exit that follows (see there)."""
    global _driver_started
    if not _driver_started or _exit_when_done:
        return
    import ray

    _driver_started = False
    if ray.is_initialized():
        ray.shutdown()


def leave_driver() -> None:
    """Leave the Ray driver this command started (``strata cluster start``'s: its actors are
    detached and outlive it) to the end of the process when ``ops.cli.main.entry`` ends it, as
    it ends the driver ``connect`` starts, without Ray's teardown; else end it now."""
    global _driver_started
    if _exit_when_done:
        _driver_started = True
        return
    end_driver()


def end_driver() -> None:
    """End this process's Ray driver, whoever started it (start and stop run as commands of
    their own: their driver is theirs)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()


def exit_when_done() -> None:
    """Leave the Ray driver ``connect`` starts to the end of the process: ``ops.cli.main.entry``
    ends the process after the command, and ``disconnect`` then leaves the driver alone."""
    global _exit_when_done
    _exit_when_done = True


def driver_started() -> bool:
    """Whether ``connect`` made this process a Ray driver that ``disconnect`` has not ended."""
    return _driver_started


def dir_summary(row: dict[str, Any]) -> dict[str, Any]:
    """A directory's row of ``Cluster.stats`` as ``cluster status`` and ``cluster start`` report
    it; ``skipped`` lists the partitions its load skipped (``strata log-dirs describe`` has
    their paths and what was done)."""
    return {"log_dir": row["log_dir"], "online": bool(row.get("online")),
            "offline_reason": row.get("offline_reason"), "partitions": row.get("partitions", 0),
            "pid": row.get("pid") or None,
            "log_bytes": row.get("log_bytes", 0), "free_bytes": row.get("disk_free_bytes", 0),
            "total_bytes": row.get("disk_total_bytes", 0),
            "had_clean_shutdown": row.get("had_clean_shutdown"),
            "skipped": [{"partition": p["name"], "error": p["error"], "reason": p["reason"]}
                        for p in row.get("problems") or ()]}


def dirs_need_attention(dirs: list[dict[str, Any]]) -> bool:
    """Whether a directory of ``dirs`` (``dir_summary`` rows) is offline or skipped a partition
    when it loaded: ``cluster status`` then exits with ``EXIT_PROBLEMS``."""
    return any(not d["online"] or d["skipped"] for d in dirs)


def bytes_text(count: Any) -> str | None:
    """A byte count for a table (``1.5 KiB``); None stays None."""
    from ops.tools.output import human_bytes

    return None if count is None else human_bytes(int(count))


def write(document: Any) -> None:
    """``document`` as one line of JSON on stdout."""
    from ops.tools.output import write_json

    write_json(jsonable(document))
