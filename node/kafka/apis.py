"""``KafkaApis``: one request frame in, its answer out (Kafka's ``KafkaApis``), for one served
directory.

Disk work (produce, fetch reads, list offsets, metadata, producer ids) runs in the server's
thread pool, so a slow disk or a parked fetch never holds the event loop. The group APIs
(``GROUP_HANDLERS``) run in the pool too, and return a future of their answer, completed by
the group coordinator (a JoinGroup parks for the whole rebalance): it is awaited on the event
loop (``asyncio.wrap_future``), holding no thread. A Fetch is long-polled
here: it is read, and while it gathered fewer than ``min_bytes`` (capped at ``max_bytes``) with
no partition in error, it waits for an append to a log of the directory (``AppendSignal``) or
for ``max_wait_ms`` to pass, and is read again.

``handle_pipelined`` answers the requests a connection has sent without waiting for their
answers (librdkafka keeps several produce requests in flight): a run of consecutive Produce
and ``HANDLERS`` requests is decoded, handled and encoded in one call in the pool, one request
after the other in their order, so the idempotent producer's sequence checks see them in order
and the answers come back in request order, with one hop to the pool and back for the run
instead of one per request. A run of Produce requests of at most ``PRODUCE_ON_LOOP_BYTES`` that
wait on nothing but their appends' writes (``produce.appends_only``: no transaction, every
partition held here, no fsync per append) is answered on the event loop itself: the hop to
the pool and back, two thread switches, was half the round trip of a latency-minded producer's
request (measured: 1.6-2x the records/s of an idempotent librdkafka producer at ~8 records a
batch). Larger runs, and every other request, go to the pool, and so does every produce until
the process has loaded its compiled kernels (``storage.jit``): the load (numba's import, about
0.3 s) then happens in a pool thread, never on the loop that serves every connection. The price:
while such an append waits on its disk (the kernel holding back a writer of too many dirty
pages), the directory's other connections wait too; their requests are for the same disk.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from node.kafka.admin import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
    handle_describe_configs,
)
from node.kafka.alter_configs import handle_alter_configs, handle_incremental_alter_configs
from node.kafka.api_versions import handle_api_versions
from node.kafka.codec import (
    ApiVersionsTooNew,
    Request,
    api_versions_unsupported,
    decode_request,
    encode_produce,
    encode_response,
    millis,
)
from node.kafka.context import ServedDir
from node.kafka.delete_records import handle_delete_records
from node.kafka.errors import KafkaProtocolError
from node.kafka.describe_producers import handle_describe_producers
from node.kafka.framing import HEADER_START, peek_header
from node.kafka.fetch import FetchRead, fetch_response, read_partitions, session_error
from node.kafka.find_coordinator import handle_find_coordinator
from node.kafka.group_admin import (
    handle_delete_groups,
    handle_describe_groups,
    handle_list_groups,
)
from node.kafka.groups import (
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_sync_group,
)
from node.kafka.init_producer_id import handle_init_producer_id
from node.kafka.leader_epoch import handle_offset_for_leader_epoch
from node.kafka.list_offsets import handle_list_offsets
from node.kafka.log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from node.kafka.metadata import handle_describe_cluster, handle_metadata
from node.kafka.offset_commit import handle_offset_commit
from node.kafka.offset_delete import handle_offset_delete
from node.kafka.offset_fetch import handle_offset_fetch
from node.kafka.produce import appends_only, handle_produce
from node.kafka.sasl_handshake import handle_sasl_authenticate, handle_sasl_handshake
from node.kafka import txn_apis
from node.kafka.txn_offset_commit import handle_txn_offset_commit
from node.kafka.versions import ApiKey
from storage import jit

T = TypeVar("T")
Handler = Callable[[ServedDir, Request], Any]
# (served, request, the client's host as Kafka names it: "/127.0.0.1") -> future of the answer
GroupHandler = Callable[[ServedDir, Request, str], "Future[Any]"]

# the APIs answered by one call in the pool (ApiVersions, Produce and Fetch are special)
HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.METADATA: handle_metadata,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.ADD_PARTITIONS_TO_TXN: txn_apis.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: txn_apis.handle_add_offsets_to_txn,
    ApiKey.END_TXN: txn_apis.handle_end_txn,
    ApiKey.DESCRIBE_TRANSACTIONS: txn_apis.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: txn_apis.handle_list_transactions,
}

# the APIs answered by the group coordinator, later
GROUP_HANDLERS: dict[ApiKey, GroupHandler] = {
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
}


# the APIs a pipelined run answers in one call in the pool
POOLED: frozenset[int] = frozenset({ApiKey.PRODUCE, *HANDLERS})
# a run of Produce requests this small that only appends is answered on the event loop
PRODUCE_ON_LOOP_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Reply:
    """What to do after a request: send ``data`` (None: send nothing), then close the connection
    when ``close`` (an acks=0 produce that failed)."""

    data: bytes | None
    close: bool = False


@dataclass(frozen=True, slots=True)
class Replies:
    """The replies to pipelined requests, in request order, up to the first that closes the
    connection: the last reply's ``close``, or ``error`` (the request after the last reply
    must close the connection without a reply). Requests after those are not served."""

    replies: list[Reply]
    error: KafkaProtocolError | None = None

    @property
    def closes(self) -> bool:
        return self.error is not None or bool(self.replies and self.replies[-1].close)


class KafkaApis:
    """Answers the requests of every connection of one served directory. Thread-safe; its
    coroutines run on the server's event loop."""

    def __init__(self, served: ServedDir, pool: Executor) -> None:
        self.served = served
        self._pool = pool

    async def handle_pipelined(self, frames: list[bytes], client_host: str = "") -> Replies:
        """The replies to ``frames`` (request frames without their size prefix), requests of
        one connection from ``client_host`` in the order they arrived, one or more (see the
        module docstring); a request that fails with ``KafkaProtocolError`` (the connection
        must be closed without a reply) or whose reply closes the connection ends them."""
        loop = asyncio.get_running_loop()
        replies: list[Reply] = []
        start = 0
        while start < len(frames):
            stop = start
            while stop < len(frames) and _pooled(frames[stop]):
                stop += 1
            if stop > start:
                requests, error = _decoded(frames[start:stop])
                if self._on_loop(requests, frames[start:stop]):
                    done = self._answer_run(requests, error)
                else:
                    done = await loop.run_in_executor(self._pool, self._answer_run, requests,
                                                      error)
                replies.extend(done.replies)
                if done.closes:
                    return Replies(replies, done.error)
                start = stop
                continue
            try:
                reply = await self._handle_one(frames[start], client_host)
            except KafkaProtocolError as err:
                return Replies(replies, err)
            replies.append(reply)
            if reply.close:
                break
            start += 1
        return Replies(replies)

    def _on_loop(self, requests: list[Request], frames: list[bytes]) -> bool:
        """Whether the run of ``requests`` (from ``frames``) is answered on the event loop."""
        return (jit.loaded() and sum(len(frame) for frame in frames) <= PRODUCE_ON_LOOP_BYTES
                and all(r.api_key == ApiKey.PRODUCE and appends_only(self.served, r)
                        for r in requests))

    def _answer_run(self, requests: list[Request],
                    error: KafkaProtocolError | None) -> Replies:
        """Each of ``requests`` (Produce or ``HANDLERS`` requests) handled and encoded, in
        order; then ``error``, the one the frame after them raised when decoded."""
        replies: list[Reply] = []
        for decoded in requests:
            key = decoded.api_key
            if key == ApiKey.PRODUCE:
                outcome = handle_produce(self.served, decoded)
                if outcome.acks == 0:
                    replies.append(Reply(None, close=outcome.failed))
                    if outcome.failed:
                        break
                    continue
                replies.append(Reply(encode_produce(decoded, outcome.topics,
                                                    outcome.node_endpoints)))
                continue
            body = HANDLERS[ApiKey(key)](self.served, decoded)
            replies.append(Reply(encode_response(decoded, key, body)))
        else:
            return Replies(replies, error)
        return Replies(replies)

    async def _handle_one(self, frame: bytes, client_host: str) -> Reply:
        """The reply to one request not answered in a pooled run: ApiVersions (on the event
        loop), a Fetch (long-polled), a group API (its answer awaited); a frame that does not
        decode raises ``KafkaProtocolError``."""
        decoded = decode_request(frame)
        if isinstance(decoded, ApiVersionsTooNew):
            return Reply(api_versions_unsupported(decoded))
        key = decoded.api_key
        if key == ApiKey.API_VERSIONS:
            body = handle_api_versions(decoded)
        elif key == ApiKey.FETCH:
            body = await self._fetch(decoded)
        else:   # decode_request admits only the served keys; the pooled ones do not come here
            pending: Future[Any] = await self._run_group(GROUP_HANDLERS[ApiKey(key)], decoded,
                                                         client_host)
            body = await asyncio.wrap_future(pending)
        return Reply(encode_response(decoded, key, body))

    async def _run(self, handler: Callable[[ServedDir, Request], T], request: Request) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, handler, self.served, request)

    async def _run_group(self, handler: GroupHandler, request: Request,
                         client_host: str) -> Future[Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, handler, self.served, request,
                                          client_host)

    async def _fetch(self, request: Request) -> Any:
        error = session_error(request)
        if error is not None:
            return fetch_response(request, None, error)
        body = request.body
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(millis(body.max_wait), 0) / 1000
        wanted = min(body.min_bytes, body.max_bytes)
        signal = self.served.signal
        while True:
            since = signal.version
            read: FetchRead = await self._run(read_partitions, request)
            remaining = deadline - loop.time()
            if read.has_error or read.size >= wanted or remaining <= 0 or not body.topics:
                return fetch_response(request, read)
            await signal.wait_changed(since, remaining)


def _decoded(frames: list[bytes]) -> tuple[list[Request], KafkaProtocolError | None]:
    """The requests of ``frames`` (Produce or ``HANDLERS`` ones) up to the first that does not
    decode, and the error that one raised (None when all decode)."""
    requests: list[Request] = []
    for data in frames:
        try:
            decoded = decode_request(data)
        except KafkaProtocolError as err:
            return requests, err
        assert isinstance(decoded, Request)     # only ApiVersions can be too new
        requests.append(decoded)
    return requests, None


def _pooled(frame: bytes) -> bool:
    """Whether ``frame`` is a request ``handle_pipelined`` answers in a pooled run (a frame too
    short for a header is not: ``handle`` rejects it)."""
    return len(frame) >= HEADER_START.size and peek_header(frame).api_key in POOLED
