"""``meta.properties``: a log directory's identity (Kafka's ``MetaProperties``, read and written as
Kafka's ``PropertiesUtils`` does).

Layout: a Java properties file, UTF-8 text, one ``key=value`` a line; lines starting with ``#``
or ``!`` and blank lines are comments. Kafka's keys (``MetaProperties.java``)::

    version=1                         0 (ZooKeeper era: broker.id) or 1 (KRaft: node.id)
    cluster.id=<22 characters>        the cluster's id: a Kafka Uuid, base64url without padding
    node.id=<int32 >= 0>              version 1: the broker this directory belongs to
    broker.id=<int32 >= 0>            version 0: the same, under its old name
    directory.id=<22 characters>      optional: this directory's own Kafka Uuid

Other keys are ignored, as Kafka ignores them. Version 1 requires ``cluster.id`` and
``node.id`` (Kafka's ``MetaProperties.Builder.build``). Strata writes version 1 with all four
keys, in the order above, atomically (``storage.durable.atomic_write``: temp file, fsync,
rename, directory fsync), so a crash leaves the old file or the new one.

A Kafka Uuid (``org.apache.kafka.common.Uuid``) is 16 bytes printed as base64url without padding
(22 characters). ``random_uuid`` draws one as ``Uuid.randomUuid`` and
``DirectoryId.random`` do: never a reserved id (the first 100: most significant long 0, least
below 100) and never one whose text starts with ``-`` (it would read as a command-line flag).

A file that is not UTF-8, has a line without ``=``/``:``, a backslash (escapes and continued
lines are not supported), an unknown version, a missing required key, a non-numeric id, a
malformed Uuid or a reserved ``directory.id`` (Kafka's ``MetaPropertiesEnsemble.verify``) raises ``InvalidMetaPropertiesError`` naming the file and the key.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from pathlib import Path

from node.errors import InvalidMetaPropertiesError
from storage import files
from storage.durable import atomic_write

VERSION_KEY = "version"
CLUSTER_ID_KEY = "cluster.id"
NODE_ID_KEY = "node.id"
BROKER_ID_KEY = "broker.id"
DIRECTORY_ID_KEY = "directory.id"
VERSIONS = (0, 1)
CURRENT_VERSION = 1
UUID_BYTES = 16
UUID_TEXT_LENGTH = 22
RESERVED_UUIDS = 100          # DirectoryId.reserved: 0 .. 99 (MIGRATING, UNASSIGNED, LOST, ...)
INT32_MAX = 2**31 - 1
_SEPARATOR = re.compile(r"\s*[=:]\s*|\s+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]{22}")


@dataclass(frozen=True)
class MetaProperties:
    """One directory's ``meta.properties``. ``cluster_id``/``node_id``/``directory_id`` are None
    when the file does not hold them (possible in version 0 only, and ``directory_id`` in
    either)."""

    version: int
    cluster_id: str | None
    node_id: int | None
    directory_id: str | None = None

    def encode(self) -> bytes:
        lines = [f"{VERSION_KEY}={self.version}"]
        if self.cluster_id is not None:
            lines.append(f"{CLUSTER_ID_KEY}={self.cluster_id}")
        if self.node_id is not None:
            key = BROKER_ID_KEY if self.version == 0 else NODE_ID_KEY
            lines.append(f"{key}={self.node_id}")
        if self.directory_id is not None:
            lines.append(f"{DIRECTORY_ID_KEY}={self.directory_id}")
        return ("#\n" + "\n".join(lines) + "\n").encode()

    @classmethod
    def decode(cls, data: bytes, path: Path | str) -> MetaProperties:
        """Parse the bytes of ``path`` (named in every error)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise _bad(path, None, f"is not UTF-8 text ({err.reason} at byte {err.start})") \
                from None
        props: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            if "\\" in line:
                raise _bad(path, None, f"line {number} holds a backslash (escapes and continued "
                           "lines are not supported)")
            parts = _SEPARATOR.split(line, maxsplit=1)
            if len(parts) != 2:
                raise _bad(path, None, f"line {number} is not key=value: {line[:80]!r}")
            props[parts[0]] = parts[1]
        version_text = props.get(VERSION_KEY, "0")
        if version_text not in {str(v) for v in VERSIONS}:
            raise _bad(path, VERSION_KEY, f"has version {version_text[:20]!r}; only "
                       f"{' and '.join(str(v) for v in VERSIONS)} exist")
        version = int(version_text)
        cluster_id = props.get(CLUSTER_ID_KEY)
        node_key = BROKER_ID_KEY if version == 0 else NODE_ID_KEY
        node_id = _node_id(path, node_key, props.get(node_key))
        if version == 1:
            for key, value in ((CLUSTER_ID_KEY, cluster_id), (NODE_ID_KEY, node_id)):
                if value is None:
                    raise _bad(path, key, f"has version 1 but no {key}")
        directory_id = props.get(DIRECTORY_ID_KEY)
        if directory_id is not None and not is_uuid(directory_id):
            raise _bad(path, DIRECTORY_ID_KEY,
                       f"has {DIRECTORY_ID_KEY}={directory_id[:40]!r}, not a Kafka Uuid "
                       f"({UUID_TEXT_LENGTH} base64url characters)")
        if directory_id is not None and is_reserved(directory_id):
            raise _bad(path, DIRECTORY_ID_KEY, f"has the reserved {DIRECTORY_ID_KEY} "
                       f"{directory_id} (Kafka's DirectoryId.reserved: the first "
                       f"{RESERVED_UUIDS})")
        if cluster_id is not None and not cluster_id:
            raise _bad(path, CLUSTER_ID_KEY, f"has an empty {CLUSTER_ID_KEY}")
        return cls(version, cluster_id, node_id, directory_id)


def meta_properties_path(log_dir: Path) -> Path:
    return log_dir / files.META_PROPERTIES


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """The ``meta.properties`` of ``log_dir``; None when it has none. ``OSError`` other than a
    missing file propagates (the disk)."""
    path = meta_properties_path(log_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise _bad(path, None, "is a directory, not a file") from None
    return MetaProperties.decode(data, path)


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    atomic_write(meta_properties_path(log_dir), meta.encode())


def is_uuid(text: str) -> bool:
    """``text`` is a Kafka Uuid as ``Uuid.toString`` prints it (and ``Uuid.fromString`` reads
    it back: 16 bytes)."""
    if not _BASE64URL.fullmatch(text):
        return False
    try:
        return len(base64.urlsafe_b64decode(text + "==")) == UUID_BYTES
    except ValueError:
        return False


def is_reserved(uuid: str) -> bool:
    """One of the first ``RESERVED_UUIDS`` ids (Kafka's ``DirectoryId.reserved``)."""
    raw = base64.urlsafe_b64decode(uuid + "==")
    return raw[:15] == bytes(15) and raw[15] < RESERVED_UUIDS


def random_uuid() -> str:
    """A new Kafka Uuid (``Uuid.randomUuid``, ``DirectoryId.random``): never reserved, never
    starting with ``-``."""
    while True:
        raw = os.urandom(UUID_BYTES)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not is_reserved(text) and not text.startswith("-"):
            return text


def _node_id(path: Path | str, key: str, text: str | None) -> int | None:
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]{1,10}", text) or int(text) > INT32_MAX:
        raise _bad(path, key, f"has {key}={text[:40]!r}, not a base-10 number in 0..{INT32_MAX}")
    return int(text)


def _bad(path: Path | str, key: str | None, what: str) -> InvalidMetaPropertiesError:
    fields: dict[str, str] = {"file": str(path)}
    if key is not None:
        fields["key"] = key
    return InvalidMetaPropertiesError(f"{path} {what}", **fields)
