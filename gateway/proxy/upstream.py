"""Upstream connections: a raw HTTP/1.1 client protocol and a keep-alive pool per server (which runtime holds
which pool: :mod:`gateway.proxy.pools`).

One :class:`UpstreamConnection` carries one exchange at a time (no upstream
pipelining: a response that arrives early or runs long can never be matched to
the wrong request). It parses the response head (``http1.parse_response_head``),
follows the body framing (Content-Length, chunked, or until close) and hands
head and body pieces to the exchange that owns it. After a clean, complete
response it goes back to its :class:`ConnectionPool`, which keeps up to
``max_idle_connections`` idle connections per server (most recently used first,
so fewer sockets stay warm) and closes those idle longer than
``timeouts.upstream_keepalive_s``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from typing import TYPE_CHECKING, Protocol

from gateway import metrics
from gateway.proxy.http1 import ChunkedReader, ProtocolError, ResponseHead, ResponseScan, parse_response_head

if TYPE_CHECKING:
    from gateway.proxy.tunnel import Tunnel

log = logging.getLogger("clefgate.proxy")

MAX_RESPONSE_HEAD = 64 * 1024

# body framing of the response being read
IDLE, HEAD, BODY_LENGTH, BODY_CHUNKED, BODY_EOF, TUNNEL, DONE = range(7)

_OPEN = metrics.OPEN_CONNECTIONS


class ResponseSink(Protocol):
    """What an upstream connection tells about the response it reads (an exchange: its Reply half, gateway.proxy.reply)."""

    head_request: bool
    upgrade: bool
    decode_chunks: bool
    scan: ResponseScan

    def on_interim(self, head: ResponseHead) -> None:
        """A 1xx response other than 101 (more responses follow)."""

    def on_response_head(self, head: ResponseHead, has_body: bool, chunked: bool) -> None:
        """The final response head; body bytes follow unless ``has_body`` is false."""

    def on_response_body(self, data: bytes) -> None:
        """Body bytes: raw chunked framing for HTTP/1.1 clients, payload otherwise."""

    def on_response_end(self, last: bytes = b"") -> None:
        """The response is complete; ``last`` are its final body bytes (sized bodies only)."""

    def on_upgrade(self, head: ResponseHead, rest: bytes) -> None:
        """101 Switching Protocols; ``rest`` is what the upstream sent after it."""

    def on_upstream_error(self, kind: str, detail: str, nothing_received: bool) -> None:
        """The connection failed: ``kind`` is reset, timeout or protocol."""

    def upstream_write_paused(self, paused: bool) -> None:
        """The upstream's send buffer filled (True) or drained (False)."""


class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection to an upstream server."""

    __slots__ = (
        "_buf", "_chunks", "_payload", "_remaining", "broken", "exchange", "idle_since", "paused", "pool", "received",
        "requests", "state", "transport", "tunnel",
    )

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.exchange: ResponseSink | None = None
        self.tunnel: Tunnel | None = None
        self.state = IDLE
        self.broken = False
        self.received = False
        self.requests = 0
        self.idle_since = 0.0
        self.paused = False
        self._buf = b""
        self._remaining = 0
        self._chunks: ChunkedReader | None = None
        self._payload: list[bytes] | None = None

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=256 * 1024)  # type: ignore[attr-defined]
        _OPEN.inc("upstream")

    def connection_lost(self, exc: Exception | None) -> None:
        _OPEN.dec("upstream")
        self.broken = True
        self.pool.lost(self)
        if self.tunnel is not None:
            self.tunnel.upstream_closed()
            return
        ex = self.exchange
        if ex is None:
            return
        self.exchange = None
        state = self.state
        self.state = DONE
        if state == BODY_EOF and exc is None:
            ex.on_response_end()
        elif state in (HEAD, IDLE):
            ex.on_upstream_error("reset", "the upstream closed the connection before responding", not self.received)
        elif state in (BODY_LENGTH, BODY_CHUNKED, BODY_EOF):
            ex.on_upstream_error("reset", "the upstream closed the connection inside the response body", False)

    def eof_received(self) -> bool:
        # a half-closed upstream cannot take another request; let the transport close
        self.broken = True
        return False

    def pause_writing(self) -> None:
        if self.tunnel is not None:
            self.tunnel.pause_client()
        elif self.exchange is not None:
            self.exchange.upstream_write_paused(True)

    def resume_writing(self) -> None:
        if self.tunnel is not None:
            self.tunnel.resume_client()
        elif self.exchange is not None:
            self.exchange.upstream_write_paused(False)

    def data_received(self, data: bytes) -> None:
        state = self.state
        if state == BODY_LENGTH and self.exchange is not None:
            # the hot path of large downloads: count and pass on
            rem = self._remaining
            n = len(data)
            if n < rem:
                self._remaining = rem - n
                self.exchange.on_response_body(data)
                return
            if n > rem:
                self.broken = True  # bytes after the response: never reuse
                data = data[:rem]
            self._finish_body(data)
            return
        if state == TUNNEL:
            self.tunnel.from_upstream(data)  # type: ignore[union-attr]
            return
        if self.exchange is None:
            # a server talking while no request is outstanding cannot be trusted
            self.broken = True
            if self.transport is not None:
                self.transport.close()
            return
        self.received = True
        if state == HEAD:
            self._read_head(data)
        elif state == BODY_CHUNKED:
            self._read_chunked(data)
        elif state == BODY_EOF:
            self.exchange.on_response_body(data)
        else:
            self.broken = True
            if self.transport is not None:
                self.transport.close()

    # ------------------------------------------------------------------ request side

    def send(self, exchange: ResponseSink, data: list[bytes]) -> None:
        """Start an exchange: write its request head (and any body bytes)."""
        self.exchange = exchange
        self.state = HEAD
        self.received = False
        self.requests += 1
        self.transport.writelines(data)  # type: ignore[union-attr]

    @property
    def reused(self) -> bool:
        """True when this connection already carried an earlier request."""
        return self.requests > 1

    def pause_reading(self) -> None:
        """Stop reading the response (the client cannot take more yet)."""
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read the response again."""
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def release(self) -> None:
        """The exchange is done with this connection: pool it when clean, else close."""
        self.exchange = None
        if self.state not in (DONE, IDLE) or self.broken or self._buf:
            self.close()
            return
        self.state = IDLE
        self.resume_reading()
        self.pool.release(self)

    def close(self) -> None:
        """Close now, detached from any exchange."""
        self.exchange = None
        self.broken = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once (timeouts, cancelled exchanges)."""
        self.exchange = None
        self.broken = True
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ response parsing

    def _read_head(self, data: bytes) -> None:
        ex = self.exchange
        assert ex is not None
        buf = self._buf + data if self._buf else data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_RESPONSE_HEAD:
                    self._protocol_error(ex, "response head too large")
                elif buf.count(b"\n") != buf.count(b"\r\n"):
                    # a head with bare LF line ends would never see CRLFCRLF: refuse it now
                    self._protocol_error(ex, "bare LF in the response head")
                else:
                    self._buf = buf
                return
            try:
                head = parse_response_head(buf[: end + 4], ex.scan)
            except ProtocolError as exc:
                self._protocol_error(ex, str(exc))
                return
            buf = buf[end + 4 :]
            status = head.status
            if status >= 200 or status == 101:
                break
            ex.on_interim(head)
            if self.exchange is not ex:  # the exchange gave up meanwhile
                return
            if not buf:
                self._buf = b""
                return
        self._buf = b""
        if status == 101:
            if not ex.upgrade:
                self._protocol_error(ex, "101 Switching Protocols to a request that did not ask to upgrade")
                return
            self.state = TUNNEL
            ex.on_upgrade(head, buf)
            return
        if ex.head_request or status in (204, 304):
            ex.on_response_head(head, False, False)
            if self.exchange is not ex:  # the exchange answered the client itself (a step-up) and let this connection go
                return
            if buf:
                self.broken = True
            self.state = DONE
            if head.close:
                self.broken = True
            ex.on_response_end()
            return
        if head.close:
            self.broken = True
        if head.chunked:
            self.state = BODY_CHUNKED
            self._chunks = ChunkedReader()
            self._payload = [] if ex.decode_chunks else None
            ex.on_response_head(head, True, True)
            if buf and self.exchange is ex:
                self._read_chunked(buf)
            return
        length = head.content_length
        if length >= 0:
            ex.on_response_head(head, length > 0, False)
            have = len(buf)
            if have >= length:
                # the whole body came with the head (the common small response)
                if have > length:
                    self.broken = True  # bytes after the response: never reuse
                    buf = buf[:length]
                self._finish_body(buf)
            else:
                self._remaining = length - have
                self.state = BODY_LENGTH
                if buf and self.exchange is ex:
                    ex.on_response_body(buf)
            return
        # no framing: the body runs until the server closes
        self.broken = True
        self.state = BODY_EOF
        ex.on_response_head(head, True, False)
        if buf and self.exchange is ex:
            ex.on_response_body(buf)

    def _finish_body(self, data: bytes) -> None:
        ex = self.exchange
        self.state = DONE
        self._remaining = 0
        if ex is not None:
            ex.on_response_end(data)  # the last body bytes leave with the end of the response

    def _read_chunked(self, data: bytes) -> None:
        ex = self.exchange
        reader = self._chunks
        assert ex is not None and reader is not None
        payload = self._payload
        try:
            end = reader.feed(data, payload)
        except ProtocolError as exc:
            self._protocol_error(ex, str(exc))
            return
        if end < len(data):
            self.broken = True  # bytes after the last chunk
        if payload is None:
            if end:
                ex.on_response_body(data if end == len(data) else data[:end])
        elif payload:
            for piece in payload:
                if self.exchange is not ex:
                    return
                ex.on_response_body(piece)
            payload.clear()
        if reader.done and self.exchange is ex:
            self.state = DONE
            self._chunks = None
            ex.on_response_end()

    def _protocol_error(self, ex: ResponseSink, detail: str) -> None:
        self.exchange = None
        self.state = DONE
        self.broken = True
        if self.transport is not None:
            self.transport.abort()
        ex.on_upstream_error("protocol", detail, False)


class ConnectionPool:
    """Keep-alive connections to one upstream server.

    ``take_idle`` is synchronous (the common, pooled case costs no task);
    ``acquire`` opens a new connection, waiting for a slot when
    ``max_connections`` are open.
    """

    def __init__(self, host: str, port: int, *, tls: bool, max_idle: int, max_connections: int) -> None:
        self.host = host
        self.port = port
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if tls else None
        self.max_idle = max_idle
        self.max_connections = max_connections
        self.idle: list[UpstreamConnection] = []
        self.open = 0  # connected or connecting
        self.closed = False
        self.holders = 0  # runtimes mapping a server to this pool (gateway.proxy.pools); it closes at zero
        self._waiters: deque[asyncio.Future[None]] = deque()

    def configure(self, max_idle: int, max_connections: int) -> None:
        """Apply new limits after a reload (the connections themselves are kept)."""
        self.max_idle = max_idle
        self.max_connections = max_connections
        while len(self.idle) > max_idle:
            self.idle.pop(0).close()

    def take_idle(self) -> UpstreamConnection | None:
        """The most recently used idle connection that is still open, or None."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if not conn.broken and conn.transport is not None and not conn.transport.is_closing():
                return conn
        return None

    async def acquire(self, connect_s: float) -> UpstreamConnection:
        """An idle connection or a new one within ``connect_s``; raises OSError/TimeoutError/PoolBusy."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + connect_s
        while True:
            conn = self.take_idle()
            if conn is not None:
                return conn
            if self.closed:
                raise ConnectionRefusedError("connection pool closed (server removed by a reload)")
            if self.open < self.max_connections:
                return await self._connect(loop, max(deadline - loop.time(), 0.001))
            left = deadline - loop.time()
            if left <= 0:
                raise PoolBusy(f"all {self.max_connections} connections to {self.host}:{self.port} are busy")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                pass
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, loop: asyncio.AbstractEventLoop, connect_s: float) -> UpstreamConnection:
        self.open += 1
        try:
            async with asyncio.timeout(connect_s):
                _, conn = await loop.create_connection(
                    lambda: UpstreamConnection(self), self.host, self.port, ssl=self.ssl,
                    server_hostname=self.host if self.ssl else None,
                )
        except BaseException:
            self.open -= 1
            self._wake()
            raise
        return conn

    def release(self, conn: UpstreamConnection) -> None:
        """Take back a clean connection after a complete exchange."""
        if self.closed or len(self.idle) >= self.max_idle:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self.idle.append(conn)
        self._wake()

    def lost(self, conn: UpstreamConnection) -> None:
        """A connection closed (called once per connection from connection_lost)."""
        self.open -= 1
        if conn in self.idle:
            self.idle.remove(conn)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def prune(self, now: float, keepalive_s: float) -> None:
        """Close idle connections unused for ``keepalive_s`` (``now`` from time.monotonic)."""
        idle = self.idle
        if idle and now - idle[0].idle_since > keepalive_s:
            keep = [c for c in idle if now - c.idle_since <= keepalive_s]
            for c in idle:
                if now - c.idle_since > keepalive_s:
                    c.close()
            self.idle[:] = keep

    def close(self) -> None:
        """Close every idle connection; busy ones close when released."""
        self.closed = True
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


class PoolBusy(Exception):
    """Every allowed connection to a server stayed busy for the whole connect deadline."""
