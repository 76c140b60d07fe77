"""``KafkaServer``: a Kafka protocol listener in front of one ``LogDir``.

One thread runs an asyncio event loop that accepts connections and reads their frames; a small
thread pool (``num.io.threads``) does the disk work. Each connection's requests are handled one
at a time, in the order they arrived, and answered in that order (Kafka mutes a socket while its
request is in flight): a Fetch parked for ``max_wait_ms`` holds only its own connection. The
requests a client has pipelined (sent before their answers came) are taken together and
answered in order (``KafkaApis.handle_pipelined``), their answers written at once.

A connection is closed, and nothing else notices, when it sends a frame size that is negative or
above ``socket.request.max.bytes``, an API key or version not served (ApiVersions above its range
is answered instead, KIP-511), a request that does not decode, when it sends nothing for
``connections.max.idle.ms`` between requests, or when a request fails in a way that has no Kafka
answer (logged). A connection beyond ``max.connections`` is closed as soon as it is accepted
(Kafka instead stops accepting until a slot frees; either way it is not served).

    with KafkaServer(logdir, KafkaServerConfig(listeners="PLAINTEXT://127.0.0.1:0")) as server:
        server.bootstrap_servers        # "127.0.0.1:41231"

An ``SSL`` or ``SASL_SSL`` listener speaks TLS (``tls.TlsConfig``: the key store is read when the
server is made, so a store that cannot be read fails there, naming its key and file); a
connection that fails its handshake is closed and the listener goes on. On a ``SASL_PLAINTEXT``
or ``SASL_SSL`` listener a connection first authenticates (``sasl.SaslAuthenticator``:
ApiVersions, SaslHandshake, SaslAuthenticate with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 against
the ``credentials.CredentialCache`` built at construction); until it has, its frames are bounded
by ``sasl.server.max.receive.size`` and no other request is served. After a failed
authentication the answer is sent and the connection closed once the client closed it or
``connection.failed.authentication.delay.ms`` passed.

The directory's group coordinator (``ServedGroups``, settings from ``group.*``/``offsets.*``)
loads the ``__consumer_offsets`` partitions the directory holds in the pool as the server
starts; requests for them wait for that.

``close`` stops accepting, closes every connection (a parked fetch ends unanswered), waits for
the pool's running work, closes the group coordinator and joins the thread: nothing is left
running.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

from node.kafka.append_signal import AppendSignal
from node.kafka.apis import KafkaApis, Replies
from node.kafka.broker_view import BrokerView, LogDirBrokerView
from node.kafka.config import KafkaServerConfig
from node.kafka.context import ServedDir
from node.kafka.credentials import CredentialCache
from node.kafka.errors import KafkaProtocolError
from node.groups.coordinator import GroupCoordinator
from node.kafka.framing import FrameReader
from node.kafka.producer_ids import ProducerIdAllocator
from node.kafka.sasl import SaslAuthenticator
from node.kafka.served_groups import ServedGroups
from node.logdir import LogDir

log = logging.getLogger(__name__)

WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
HANDSHAKE_TIMEOUT_S = 10.0   # a TLS handshake not done by then: the connection is closed
LISTEN_BACKLOG = 100


def every_interface(port: int) -> socket.socket:
    """A socket listening on ``port`` of every interface: one IPv6 socket that takes IPv4 too
    (IPv4 alone where IPv6 is off), so a port 0 is one ephemeral port for both families
    (asyncio's own binding for an empty host makes a socket per family, each on its own
    ephemeral port)."""
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        address: tuple[str, int] = ("::", port)
    except OSError:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        address = ("0.0.0.0", port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class KafkaServer:
    """Serves ``logdir`` over the Kafka protocol. ``start`` (or ``with``) binds and starts;
    ``close`` stops. Not restartable. ``view`` defaults to a cluster of this one broker
    (``LogDirBrokerView``); the producer ids come from a block kept in the directory."""

    def __init__(self, logdir: LogDir, config: KafkaServerConfig | None = None, *,
                 view: BrokerView | None = None,
                 producer_ids: ProducerIdAllocator | None = None) -> None:
        self.config = config or KafkaServerConfig()
        # read first: a key store that cannot be read fails before anything is started
        self._tls = self.config.tls.server_context() if self.config.tls is not None else None
        self.logdir = logdir
        self._bound: tuple[str, int] | None = None
        self._view = view or LogDirBrokerView(logdir, self.config.node_id, self.advertised_address)
        self._producer_ids = producer_ids or ProducerIdAllocator(logdir.path)
        self._pool = ThreadPoolExecutor(self.config.num_io_threads,
                                        thread_name_prefix=f"kafka-io-{logdir.path.name}")
        self._groups = ServedGroups(logdir, GroupCoordinator(self.config.group_coordinator))
        self._served = ServedDir(logdir, self._view, self.config, self._producer_ids,
                                 AppendSignal(), self._groups)
        self._apis = KafkaApis(self._served, self._pool)
        self._credentials = (CredentialCache.from_config(self.config)
                             if self.config.is_sasl() else None)
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._start_error: BaseException | None = None
        self._closed = False

    # ---- life --------------------------------------------------------------------------------
    def start(self) -> KafkaServer:
        """Bind the listener and start serving; raises what binding raised (``OSError``)."""
        if self._thread is not None or self._closed:
            raise RuntimeError("a KafkaServer starts once")
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                        name=f"kafka-listener-{self.logdir.path.name}")
        self._thread.start()
        ready.wait()
        if self._start_error is not None:
            self._thread.join()
            self._pool.shutdown(wait=True)
            self._groups.close()
            self._closed = True
            raise self._start_error
        self._pool.submit(self._load_groups)
        return self

    def _load_groups(self) -> None:
        try:
            self._groups.sync()
        except Exception:  # noqa: BLE001 - each request loads its group's partition again
            log.exception("%s: loading the groups failed", self.logdir.path)

    def close(self) -> None:
        """Stop serving and release the thread and the pool. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        else:
            self._loop.close()
        self._pool.shutdown(wait=True)
        self._groups.close()

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def groups(self) -> ServedGroups:
        """The directory's group coordinator and the partitions it has loaded."""
        return self._groups

    # ---- addresses ---------------------------------------------------------------------------
    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); the port is the real one when the config asked for 0."""
        if self._bound is None:
            raise RuntimeError("the server is not started")
        return self._bound

    def advertised_address(self) -> tuple[str, int]:
        """What Metadata names as this broker: ``advertised.listeners``, else the bound address;
        a listener on every interface (host empty, ``0.0.0.0`` or ``::``) advertises this
        machine's name, as Kafka advertises its canonical host name for an empty host."""
        advertised = self.config.advertised_listener()
        if advertised is not None:
            return advertised.host, advertised.port
        host, port = self.address
        if host in WILDCARD_HOSTS:
            return socket.getfqdn(), port
        return host, port

    @property
    def bootstrap_servers(self) -> str:
        host, port = self.advertised_address()
        return f"{host}:{port}"

    # ---- the loop ----------------------------------------------------------------------------
    def _run(self, ready: threading.Event) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        listener = self.config.listener()
        tls = {} if self._tls is None else {"ssl": self._tls,
                                            "ssl_handshake_timeout": HANDSHAKE_TIMEOUT_S}
        try:
            server = loop.run_until_complete(
                asyncio.start_server(self._accept, sock=every_interface(listener.port), **tls)
                if not listener.host else
                asyncio.start_server(self._accept, listener.host, listener.port, **tls))
            host, port = server.sockets[0].getsockname()[:2]
            self._bound = (host, port)
        except BaseException as err:
            self._start_error = err
            loop.close()
            ready.set()
            return
        log.info("serving %s over the Kafka protocol on %s:%d", self.logdir.path, host, port)
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for task in list(self._connections):
                task.cancel()
            loop.run_until_complete(asyncio.gather(*self._connections, return_exceptions=True))
            loop.run_until_complete(server.wait_closed())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername")
        if len(self._connections) >= self.config.max_connections:
            log.warning("refusing the connection from %s: max.connections=%d are open", peer,
                        self.config.max_connections)
            writer.close()
            return
        self._connections.add(task)
        try:
            await self._serve(reader, writer, peer)
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception:   # a bug in a handler: this connection ends, the server goes on
            log.exception("connection from %s failed; closing it", peer)
        finally:
            self._connections.discard(task)
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     peer: object) -> None:
        idle_s = self.config.connections_max_idle_ms / 1000
        authenticator = (None if self._credentials is None
                         else SaslAuthenticator(self._credentials, peer))
        frames = FrameReader(reader)
        while True:
            authenticating = authenticator is not None and not authenticator.complete
            limit, limit_key = ((self.config.sasl_server_max_receive_size,
                                 "sasl.server.max.receive.size") if authenticating else
                                (self.config.socket_request_max_bytes,
                                 "socket.request.max.bytes"))
            try:
                frame = await frames.next(limit, limit_key, idle_s)
            except TimeoutError:
                log.info("closing the connection from %s: idle for connections.max.idle.ms=%d",
                         peer, self.config.connections_max_idle_ms)
                return
            except KafkaProtocolError as err:
                log.warning("closing the connection from %s: %s", peer, err)
                return
            if frame is None:
                return
            try:
                if authenticating:
                    assert authenticator is not None
                    replies = Replies([authenticator.handle(frame)])
                else:
                    replies = await self._apis.handle_pipelined(
                        [frame, *_pipelined(frames, limit, limit_key)], client_host(peer))
            except KafkaProtocolError as err:
                log.warning("closing the connection from %s: %s", peer, err)
                return
            for reply in replies.replies:
                if reply.data is not None:
                    writer.write(reply.data)
            await writer.drain()
            if replies.error is not None:
                log.warning("closing the connection from %s: %s", peer, replies.error)
                return
            if replies.closes:
                if authenticating:
                    await _await_client_close(
                        reader, self.config.connection_failed_authentication_delay_ms / 1000)
                return


def _pipelined(frames: FrameReader, limit: int, limit_key: str) -> list[bytes]:
    """The frames after the first that ``frames`` already holds whole; a frame of a size out of
    bounds ends them (the next read raises for it, after the earlier ones are answered)."""
    taken = []
    try:
        while (frame := frames.ready(limit, limit_key)) is not None:
            taken.append(frame)
    except KafkaProtocolError:
        pass
    return taken


def client_host(peer: object) -> str:
    """The client's address as Kafka names it in a group member (``InetAddress.toString``
    without a host name: "/127.0.0.1")."""
    if isinstance(peer, tuple) and peer:
        host = str(peer[0])
        return "/" + (host[7:] if host.startswith("::ffff:") else host)
    return "/"


async def _await_client_close(reader: asyncio.StreamReader, seconds: float) -> None:
    """Wait up to ``seconds`` for the client to close (what it sends is dropped). After a failed
    authentication Kafka delays the close by ``connection.failed.authentication.delay.ms``;
    closing at once may reach a client in the same read as the answer, and kafka-python then
    drops the answer and sees only a lost connection."""
    try:
        async with asyncio.timeout(seconds):
            while await reader.read(65536):
                pass
    except TimeoutError:
        pass
