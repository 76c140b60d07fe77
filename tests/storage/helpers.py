"""Helpers for storage tests: records whose key and value are decimal strings, as Kafka's tests use."""

from __future__ import annotations

from storage.records import Record, build_batch


def rec(i: int, ts: int = 1_700_000_000_000, key: bool = True) -> Record:
    return Record(key=f"{i:06d}".encode() if key else None, value=f"{i:06d}".encode(), timestamp=ts)


def batch_of(*ids: int, ts: int = 1_700_000_000_000, base_offset: int = 0) -> bytes:
    return build_batch([rec(i, ts) for i in ids], base_offset=base_offset)


def values(records) -> list[int]:
    return [int(r.value) for r in records]


def offsets(records) -> list[int]:
    return [r.offset for r in records]
