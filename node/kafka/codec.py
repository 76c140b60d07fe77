"""Requests decoded and responses encoded with kio (Kafka's JSON schemas as dataclasses).

Decoding: ``peek_header`` gives the api key and version; kio's request class of that version names
its header class (v1, or v2 for a flexible version: client_id keeps its int16 length in both);
kio reads the header, then the body. Record batches stay bytes (``records`` fields).

Encoding: a response is built with ``build`` from plain values (nested structures as mappings or
sequences of mappings, durations as milliseconds, fields the version lacks dropped), so a handler
describes one answer for every version it serves. ApiVersions responses carry response header v0
at every version (KIP-511; kio's classes say so); every other flexible version uses v1.

Before kio reads a request, ``bounds.check_bounds`` checks every length in it against the bytes
left (kio's native reader aborts the process on an allocation a hostile length asks for).

One special case sits before kio: an ApiVersions request above the versions served is answered in
v0 format, UNSUPPORTED_VERSION with the ApiVersions range, without reading its body
(``api_versions_unsupported``), so the client can retry with a version we speak.

Produce and Fetch, the hot messages, skip kio's reader and writer: ``hot_codec`` decodes their
requests into kio's own dataclasses and encodes their responses, byte for byte as kio would.
"""

from __future__ import annotations

import datetime
import functools
import io
import typing
from dataclasses import dataclass, fields, is_dataclass
from types import UnionType
from typing import Any, Mapping, Sequence

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import TZAware, i32Timedelta

from node.kafka.bounds import check_bounds
from node.kafka.errors import MalformedRequestError, UnsupportedRequestError
from node.kafka.framing import frame, peek_header
from node.kafka.hot_codec import (
    NodeEndpoint,
    ProducedTopics,
    decode_hot_request,
    encode_hot_response,
    encode_produce_answer,
    produce_response_header,
)
from node.kafka.versions import SUPPORTED, ApiKey

HOT_KEYS = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request: the header's fields and kio's body of ``api_key`` at
    ``api_version``."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


@dataclass(frozen=True, slots=True)
class ApiVersionsTooNew:
    """An ApiVersions request above the served range: answer ``api_versions_unsupported``."""

    api_version: int
    correlation_id: int


def decode_request(data: bytes | memoryview) -> Request | ApiVersionsTooNew:
    """The request in ``data`` (one frame without its size prefix).

    Raises ``UnsupportedRequestError`` for an API key not served or a version outside its
    range (ApiVersions above its range returns ``ApiVersionsTooNew`` instead), and
    ``MalformedRequestError`` for a header or body kio cannot read (truncated bytes, a length
    past the end, checked before kio allocates it, an unknown tagged field: kio raises
    ``KeyError`` for those)."""
    start = peek_header(data)
    served = SUPPORTED.get(start.api_key)
    if served is None:
        raise UnsupportedRequestError(
            f"API key {start.api_key} is not served", api_key=start.api_key,
            api_version=start.api_version)
    if start.api_version not in served:
        if start.api_key == ApiKey.API_VERSIONS and start.api_version > served.max_version:
            return ApiVersionsTooNew(start.api_version, start.correlation_id)
        raise UnsupportedRequestError(
            f"API key {start.api_key} version {start.api_version} is outside the served "
            f"{served.min_version}-{served.max_version}", api_key=start.api_key,
            api_version=start.api_version)
    buffer = bytes(data)
    if start.api_key in HOT_KEYS:
        client_id, body = decode_hot_request(buffer, start.api_key, start.api_version)
        return Request(start.api_key, start.api_version, start.correlation_id, client_id, body)
    cls = request_class(start.api_key, start.api_version)
    try:
        check_bounds(cls, buffer, check_bounds(cls.__header_schema__, buffer, 0))
        header, used = entity_reader(cls.__header_schema__)(buffer, 0)
        body, _ = entity_reader(cls)(buffer, used)
    except Exception as err:   # kio's readers raise whatever the bytes provoke
        raise MalformedRequestError(
            f"API key {start.api_key} version {start.api_version}: the request does not "
            f"decode: {type(err).__name__}: {err}", api_key=start.api_key,
            api_version=start.api_version, reason=str(err)) from err
    return Request(start.api_key, start.api_version, start.correlation_id,
                   getattr(header, "client_id", None), body)


@functools.cache
def response_class(api_key: int, api_version: int) -> type:
    """kio's response class of ``api_key`` at ``api_version`` (looked up once: kio resolves
    the class by importing its module by name on every call)."""
    return load_response_schema(api_key, api_version)


@functools.cache
def request_class(api_key: int, api_version: int) -> type:
    """kio's request class of ``api_key`` at ``api_version`` (looked up once)."""
    return load_request_schema(api_key, api_version)


def encode_response(request: Request | ApiVersionsTooNew, api_key: int, body: Any) -> bytes:
    """The framed response ``body`` (a kio response entity) to ``request``."""
    if api_key in HOT_KEYS:
        return frame(encode_hot_response(api_key, type(body).__version__,
                                         request.correlation_id, body))
    header_cls = type(body).__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(out, header_cls(correlation_id=request.correlation_id))
    entity_writer(type(body))(out, body)
    return frame(out.getvalue())


def encode_produce(request: Request, topics: ProducedTopics,
                   node_endpoints: Sequence[NodeEndpoint] = ()) -> bytes:
    """The framed Produce response to ``request`` holding ``topics`` and the leaders'
    ``node_endpoints`` (no throttle)."""
    return frame(produce_response_header(request.api_version, request.correlation_id)
                 + encode_produce_answer(topics, 0, request.api_version, node_endpoints))


def api_versions_unsupported(request: ApiVersionsTooNew) -> bytes:
    """The v0-format UNSUPPORTED_VERSION answer to a too-new ApiVersions request, listing only
    the ApiVersions range (Kafka's ``ApiVersionsRequest.getErrorResponse``)."""
    served = SUPPORTED[ApiKey.API_VERSIONS]
    body = build(response_class(ApiKey.API_VERSIONS, 0), {
        "error_code": ErrorCode.unsupported_version,
        "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": served.min_version,
                      "max_version": served.max_version}],
    })
    return encode_response(request, ApiKey.API_VERSIONS, body)


# ---- building responses ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _FieldKind:
    name: str
    nested: type | None      # the entity class of a nested field (or of a tuple's elements)
    many: bool               # a tuple of ``nested``
    kind: str                # "timedelta", "datetime" or "" (taken as given)


@functools.cache
def _field_kinds(cls: type) -> dict[str, _FieldKind]:
    hints = typing.get_type_hints(cls)
    kinds = {}
    for f in fields(cls):
        hint = hints[f.name]
        options = typing.get_args(hint) if isinstance(hint, UnionType) else (hint,)
        nested, many, kind = None, False, ""
        for option in options:
            if typing.get_origin(option) is tuple:
                element = typing.get_args(option)[0]
                if is_dataclass(element):
                    nested, many = element, True
            elif isinstance(option, type) and is_dataclass(option):
                nested = option
            elif option is i32Timedelta:
                kind = "timedelta"
            elif option is TZAware:
                kind = "datetime"
        kinds[f.name] = _FieldKind(f.name, nested, many, kind)
    return kinds


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of the kio entity ``cls`` from ``values``: keys the class lacks are dropped
    (a field of another version), missing ones take the schema's default; nested entities are
    built from mappings, durations from milliseconds, timestamps from epoch milliseconds (-1:
    none). A field without a default that is missing raises ``TypeError`` (a bug here)."""
    kwargs = {}
    for name, spec in _field_kinds(cls).items():
        if name not in values:
            continue
        value = values[name]
        if spec.nested is not None and value is not None:
            if spec.many:
                value = tuple(build(spec.nested, item) if isinstance(item, Mapping) else item
                              for item in value)
            elif isinstance(value, Mapping):
                value = build(spec.nested, value)
        elif spec.kind == "timedelta" and isinstance(value, int):
            value = i32Timedelta.parse(datetime.timedelta(milliseconds=value))
        elif spec.kind == "datetime" and isinstance(value, int):
            value = (None if value < 0 else
                     datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC))
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def millis(value: datetime.timedelta | int) -> int:
    """A kio duration as whole milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)

