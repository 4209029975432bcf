"""One request and its response: decide, forward or answer locally, account.

An :class:`Exchange` is created by the client connection when a request head is
complete (judged by :func:`gateway.proxy.head.parse_head`, whose
:class:`~gateway.proxy.head.RequestHead` it keeps in ``request``), and lives until both the request body has been read and a response
has been sent. Only the oldest exchange of a connection is *active* (pipelined
ones wait their turn), so responses leave in request order.

The path through an exchange for the common case is synchronous: the pipeline
decides without awaiting, an idle pooled upstream connection takes the request
head, the upstream's response head and body are written to the client, and the
upstream connection goes back to the pool. A task is created only when the
pipeline needs the model, when a new upstream connection must be opened, or for
a local endpoint that awaits.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gateway import metrics
from gateway.features import Features
from gateway.proxy.errors import GatewayError, render_error
from gateway.proxy.head import CHUNKED, LENGTH, NO_BODY, RequestHead
from gateway.proxy.http1 import (
    IDEMPOTENT_METHODS,
    LAST_CHUNK,
    ResponseHead,
    chunk,
    header_stripper,
    status_line,
)
from gateway.proxy.upstream import PoolBusy, UpstreamConnection
from gateway.verdict import Action, LocalResponse, Verdict

if TYPE_CHECKING:
    from gateway.backends import Backend, Route, Server
    from gateway.proxy.downstream import ClientConnection
    from gateway.proxy.settings import ProxySettings

log = logging.getLogger("clefgate.proxy")

# what the exchange is doing with request body bytes as they arrive
B_BUFFER, B_FORWARD, B_DISCARD = 0, 1, 2

# why the exchange waits, for the deadline sweeper
D_NONE, D_RESPONSE, D_UPSTREAM_IDLE = 0, 1, 2

# pause reasons of the client connection (bit flags); P_EXCHANGE are cleared when an exchange ends
P_UPLOAD, P_WAIT, P_BUFFER, P_PIPELINE, P_UPGRADE = 1, 2, 4, 8, 16
P_EXCHANGE = P_UPLOAD | P_WAIT | P_BUFFER

LOCAL_BODY_MAX = 64 * 1024
# a request body smaller than this is read and dropped after an early response,
# keeping the connection; a larger one closes it (lingering)
DISCARD_MAX = 64 * 1024
# bytes buffered for a request that cannot be forwarded yet before reading pauses
BUFFER_MAX = 64 * 1024

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_REQUESTS = metrics.REQUESTS
_ADDED = metrics.ADDED_LATENCY
_UPSTREAM = metrics.UPSTREAM_LATENCY
_UPSTREAM_ERRORS = metrics.UPSTREAM_ERRORS
_CLIENT_ERRORS = metrics.CLIENT_ERRORS
_STATUS = {code: str(code) for code in range(100, 600)}
_perf = time.perf_counter
_FORWARD = Action.FORWARD

# label values of requests the gateway answered without a verdict
_NO_ACTION = "none"
_GATEWAY = "gateway"
# the encoded header lines of the gateway's own responses, by (content type, fields): a challenge
# page has the same half-dozen fields for every client, and a flood gets one per request
_LOCAL_HEADERS: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}


def _local_header_lines(content_type: str, headers: tuple[tuple[str, str], ...], body_len: int) -> list[bytes]:
    """``content-type``, ``content-length`` and the page's own fields, each line ending in CRLF."""
    key = (content_type, headers)
    lines = _LOCAL_HEADERS.get(key)
    if lines is None:
        parts: list[bytes] = []
        for name, value in headers:
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                continue  # never let a page's header split the response
            parts += (name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n")
        lines = b"".join(parts)
        if len(_LOCAL_HEADERS) >= 512:  # per-client fields (cookies, redirects) must not grow it without bound
            _LOCAL_HEADERS.clear()
        _LOCAL_HEADERS[key] = lines
    return [b"\r\ncontent-type: ", content_type.encode("latin-1"), b"\r\ncontent-length: %d\r\n" % body_len, lines]


class Exchange:
    """The state of one request/response pair on a client connection."""

    __slots__ = (
        "accounted",
        "added",
        "backend",
        "body_left",
        "buffered",
        "bytes_in",
        "bytes_out",
        "close_after",
        "conn",
        "deadline",
        "deadline_kind",
        "decode_chunks",
        "error",
        "expect_continue",
        "features",
        "fwd",
        "head_pending",
        "head_request",
        "keep_alive",
        "local",
        "mode",
        "out_chunked",
        "outstanding",
        "pending",
        "rejected",
        "req_done",
        "request",
        "request_id",
        "resp_done",
        "resp_started",
        "route",
        "scan",
        "server",
        "st",
        "started",
        "status",
        "t_head",
        "t_sent",
        "t_uphead",
        "task",
        "tried",
        "tunnel_rest",
        "up",
        "upgrade",
        "verdict",
        "xff",
        "xfh",
        "xfp",
    )

    def __init__(self, conn: ClientConnection, st: ProxySettings, request: RequestHead, keep_alive: bool) -> None:
        self.conn = conn
        self.st = st
        self.request = request
        self.keep_alive = keep_alive
        self.head_request = request.method_b == b"HEAD"
        self.scan = st.response_scan
        self.decode_chunks = request.version == "1.0"
        self.upgrade = request.upgrade
        self.local = False
        self.body_left = request.content_length or 0
        self.expect_continue = request.expect_continue
        self.mode = B_BUFFER
        self.pending: list[bytes] = []
        self.buffered = 0
        self.req_done = False
        self.resp_started = False
        self.resp_done = False
        self.started = False
        self.close_after = False
        self.features: Features | None = None
        self.request_id = ""
        self.fwd = request.fwd  # the forwarded header block, every field behind CRLF (a trusted Forwarded is added)
        self.xff = b""
        self.xfp = b""
        self.xfh = b""
        self.verdict: Verdict | None = None
        self.route: Route | None = None
        self.backend: Backend | None = None
        self.server: Server | None = None
        self.up: UpstreamConnection | None = None
        self.tried: list[Server] = []
        self.task: asyncio.Task[Any] | None = None
        self.head_pending = b""
        self.out_chunked = False
        self.tunnel_rest = b""
        self.status = 0
        self.error = ""
        self.bytes_in = 0
        self.bytes_out = 0
        self.t_head = _perf()
        self.t_sent = 0.0
        self.t_uphead = 0.0
        self.added = 0.0
        self.deadline = 0.0
        self.deadline_kind = D_NONE
        self.outstanding = False
        self.accounted = False
        # set when the head was refused; the error is the answer when the exchange's turn comes
        self.rejected: GatewayError | None = None

    # ================================================================== decision

    def start(self) -> None:
        """The exchange became the active one of its connection: decide and act."""
        self.started = True
        if self.rejected is None and not self.local and not self.request.body:
            self._decide()  # the common case: a request without a body, decided on its head
            return
        if self.rejected is not None:
            self.fail(self.rejected)
            return
        if self.request.body == CHUNKED and self.bytes_in > self.st.max_body:
            self._body_too_large()
            return
        if self.local:
            self._start_local()
            return
        body_prefix = self.st.body_prefix
        if body_prefix and self.request.body != NO_BODY and not self.req_done and self.buffered < body_prefix:
            # the decision needs the start of the body: read it first
            self._send_continue()
            return
        self._decide()

    def _decide(self) -> None:
        st = self.st
        features = self.features
        assert features is not None
        prefix_len = st.body_prefix
        if prefix_len and self.pending:
            features = self.features = replace(features, body_prefix=b"".join(self.pending)[:prefix_len])
        try:
            outcome = st.pipeline.decide(features)
        except Exception:
            log.exception("the decision pipeline raised for request %s", self.request_id)
            self.fail(GatewayError(500, "decision_error", "The decision pipeline failed."))
            return
        if isinstance(outcome, Verdict):
            if outcome.action is _FORWARD:
                self.verdict = outcome
                backend = st.backends.backends.get(outcome.backend or self.route.backend)  # type: ignore[union-attr]
                if backend is not None:
                    self.backend = backend
                    self._connect(False)
                    return
            self._apply(outcome)
            return
        # the model decides: wait for it without reading further requests
        self.conn.pause(P_WAIT)
        self.task = asyncio.ensure_future(outcome)
        self.task.add_done_callback(self._on_decided)

    def _on_decided(self, task: asyncio.Task[Verdict]) -> None:
        self.task = None
        if self.conn.gone:
            return
        self.conn.resume(P_WAIT)
        if task.cancelled():
            self.fail(GatewayError(503, "decision_cancelled", "The decision was cancelled."))
            return
        exc = task.exception()
        if exc is not None:
            log.error("the decision pipeline failed for request %s: %r", self.request_id, exc)
            self.fail(GatewayError(503, "decision_error", "The decision could not be made."))
            return
        self._apply(task.result())

    def _apply(self, verdict: Verdict) -> None:
        self.verdict = verdict
        if verdict.action is Action.FORWARD:
            self._forward()
            return
        pages = self.st.pipeline.pages
        features = self.features
        assert features is not None
        try:
            if pages is None:
                response = _builtin_page(verdict, self.request_id)
            elif verdict.action is Action.CHALLENGE:
                response = pages.challenge(verdict, features)
            else:
                response = pages.block(verdict, features)
        except Exception:
            log.exception("rendering the %s page failed for request %s", verdict.action.value, self.request_id)
            response = _builtin_page(verdict, self.request_id)
        self.respond_local(response)

    # ================================================================== local endpoints

    def _start_local(self) -> None:
        if self.bytes_in + (self.body_left if self.request.body == LENGTH else 0) > LOCAL_BODY_MAX:
            self.fail(GatewayError(413, "local_body_too_large", "Gateway endpoints accept at most 64 KiB."))
            return
        if not self.req_done:
            self._send_continue()
            return
        self._run_local()

    def _run_local(self) -> None:
        local = self.st.pipeline.local
        features = self.features
        assert local is not None and features is not None
        body = b"".join(self.pending)
        self.pending = []
        try:
            result = local.handle(features, body)
        except Exception:
            log.exception("gateway endpoint %s failed", features.path)
            self.fail(GatewayError(500, "local_error", "The gateway endpoint failed."))
            return
        if isinstance(result, LocalResponse):
            self.respond_local(result)
            return
        self.conn.pause(P_WAIT)
        self.task = asyncio.ensure_future(_as_awaitable(result))
        self.task.add_done_callback(self._on_local_done)

    def _on_local_done(self, task: asyncio.Task[LocalResponse]) -> None:
        self.task = None
        if self.conn.gone:
            return
        self.conn.resume(P_WAIT)
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                log.error("gateway endpoint failed for request %s: %r", self.request_id, task.exception())
            self.fail(GatewayError(500, "local_error", "The gateway endpoint failed."))
            return
        self.respond_local(task.result())

    # ================================================================== forwarding

    def _forward(self) -> None:
        st = self.st
        verdict = self.verdict
        assert verdict is not None and self.route is not None
        name = verdict.backend or self.route.backend
        backend = st.backends.backends.get(name)
        if backend is None:
            self.fail(GatewayError(503, "unknown_backend", f"Backend {name!r} is not configured."))
            return
        self.backend = backend
        self._connect(False)

    def _connect(self, fresh: bool, server: Server | None = None) -> None:
        """Send the request to ``server`` (else the one the backend picks now); a new connection is opened in a task."""
        backend = self.backend
        assert backend is not None
        if server is None:
            server = backend.select(time.monotonic(), self.tried)
        if server is None:
            self.fail(GatewayError(503, "no_healthy_backend", f"No server of backend {backend.name!r} is available."))
            return
        self.server = server
        self.tried.append(server)
        server.outstanding += 1
        self.outstanding = True
        if not fresh:
            idle = server.pool.idle
            while idle:
                up = idle.pop()
                if not up.broken:
                    self._send(up)
                    return
        self.conn.pause(P_WAIT)
        self.task = asyncio.ensure_future(server.pool.acquire(self.st.upstream_connect_s))
        self.task.add_done_callback(self._on_connected)

    def _on_connected(self, task: asyncio.Task[UpstreamConnection]) -> None:
        self.task = None
        server = self.server
        assert server is not None and self.backend is not None
        if task.cancelled():
            self._server_done()
            return
        exc = task.exception()
        if self.conn.gone:
            self._server_done()
            if exc is None:
                task.result().release()
            return
        self.conn.resume(P_WAIT)
        if exc is None:
            self._send(task.result())
            return
        self._server_done()
        if isinstance(exc, PoolBusy):
            _UPSTREAM_ERRORS.inc(self.backend.name, "busy")
            self._retry_or_fail(GatewayError(503, "upstream_busy", str(exc)))
            return
        kind = "timeout" if isinstance(exc, TimeoutError) else "connect"
        _UPSTREAM_ERRORS.inc(self.backend.name, kind)
        backend = self.backend
        server.connect_failed(time.monotonic(), backend.eject_after, backend.eject_s)
        self._retry_or_fail(GatewayError(502, "upstream_connect", f"Connecting to the upstream failed ({kind})."))

    def _retry_or_fail(self, error: GatewayError) -> None:
        backend = self.backend
        assert backend is not None
        # nothing has been sent for this request yet: another server may take it
        if self.request.method in IDEMPOTENT_METHODS and len(self.tried) <= backend.retries and not self.upgrade:
            # the server picked here is the one tried: a second pick would spend another turn of the round-robin
            server = backend.select(time.monotonic(), self.tried)
            if server is not None:
                self._connect(False, server)
                return
        self.fail(error)

    def _send(self, up: UpstreamConnection) -> None:
        st = self.st
        server = self.server
        verdict = self.verdict
        assert server is not None and verdict is not None
        self.up = up
        parts = [self.request.method_b, b" ", server.path_prefix, self.request.target, b" HTTP/1.1", self.fwd,
                 b"\r\nx-forwarded-for: ", self.xff, b"\r\nx-forwarded-proto: ", self.xfp, b"\r\nx-forwarded-host: ",
                 self.xfh, st.via_id_10 if self.request.version == "1.0" else st.via_id_11, self.request_id.encode("latin-1"),
                 b"\r\n", st.verdict_headers(verdict)[0]]
        if self.request.add_host:
            parts += (b"host: ", server.hostport.encode("latin-1"), b"\r\n")
        if self.request.body == LENGTH:
            parts.append(b"content-length: %d\r\n" % (self.request.content_length or 0))
        elif self.request.body == CHUNKED:
            parts.append(b"transfer-encoding: chunked\r\n")
        if self.upgrade:
            parts.append(b"connection: upgrade\r\nupgrade: websocket\r\n")
        parts.append(b"\r\n")
        head = b"".join(parts)
        if self.pending:
            out = [head]
            if self.request.body == CHUNKED:
                for piece in self.pending:
                    out += chunk(piece)
            else:
                out += self.pending
            self.pending = []
            self.buffered = 0
        else:
            out = [head]
        if self.req_done and self.request.body == CHUNKED:
            out.append(LAST_CHUNK)
        self.mode = B_FORWARD
        self.t_sent = _perf()
        self.deadline = self.conn.plane.now + st.upstream_response_s
        self.deadline_kind = D_RESPONSE
        if self.conn.write_paused:
            up.pause_reading()
        up.send(self, out)
        if not self.req_done:
            self._send_continue()
            self.conn.resume(P_BUFFER)

    def _send_continue(self) -> None:
        if self.expect_continue and self.bytes_in == 0:
            self.expect_continue = False
            self.conn.transport.write(CONTINUE)  # type: ignore[union-attr]

    # ================================================================== request body

    def on_request_body(self, data: bytes) -> None:
        """Body bytes of this request, de-chunked by the parser."""
        n = len(data)
        self.bytes_in += n
        if self.request.body == LENGTH:
            self.body_left -= n
        mode = self.mode
        if mode == B_FORWARD:
            self._request_moved()
            up = self.up
            if up is not None and up.transport is not None:
                if self.request.body == CHUNKED:
                    if self.bytes_in > self.st.max_body:
                        self._body_too_large()
                        return
                    up.transport.writelines(chunk(data))
                else:
                    up.transport.write(data)
            return
        if mode == B_DISCARD:
            return
        self.pending.append(data)
        self.buffered += n
        if not self.started:
            # a pipelined request waiting its turn: hold a bounded amount, then stop reading
            if self.buffered > BUFFER_MAX:
                self.conn.pause(P_BUFFER)
            return
        if self.request.body == CHUNKED and self.bytes_in > self.st.max_body:
            self._body_too_large()
            return
        if self.local:
            if self.bytes_in > LOCAL_BODY_MAX:
                self.fail(GatewayError(413, "local_body_too_large", "Gateway endpoints accept at most 64 KiB."))
            return
        if self.verdict is None and self.task is None and self.buffered >= self.st.body_prefix:
            # enough of the body to decide
            self._decide()
        elif self.buffered > BUFFER_MAX:
            self.conn.pause(P_BUFFER)

    def _body_too_large(self) -> None:
        _CLIENT_ERRORS.inc("413")
        if self.resp_started:
            self.error = "body_too_large"
            self.conn.abort()
            return
        if self.up is not None:
            self.up.abort()
            self.up = None
            self._server_done()
        self.fail(GatewayError(413, "body_too_large", "The request body is larger than the configured limit."))

    def _request_moved(self) -> None:
        """Request bytes went upstream: the time to the first response byte counts from the end of the request, so an
        upload that keeps moving is not the upstream being slow to answer."""
        if self.deadline_kind == D_RESPONSE:
            self.deadline = self.conn.plane.now + self.st.upstream_response_s

    def on_request_end(self) -> None:
        """The whole request has been read."""
        self.req_done = True
        if self.mode == B_FORWARD:
            self._request_moved()
            up = self.up
            if self.request.body == CHUNKED and up is not None and up.transport is not None:
                up.transport.write(LAST_CHUNK)
        elif self.started and self.mode == B_BUFFER:
            if self.local:
                if self.task is None and not self.resp_started:
                    self._run_local()
            elif self.verdict is None and self.task is None:
                self._decide()
        if self.resp_done:
            self.finish()

    # ================================================================== response from upstream

    def on_interim(self, head: ResponseHead) -> None:
        """A 1xx response: 100 is ours to send (Expect is not forwarded); others pass to HTTP/1.1 clients."""
        if head.status == 100 or self.request.version == "1.0":
            return
        self.conn.transport.write(b"HTTP/1.1 " + head.status_text + head.block + b"\r\n\r\n")  # type: ignore[union-attr]

    def on_response_head(self, head: ResponseHead, has_body: bool, chunked: bool) -> None:
        """The final response head: build what the client gets; it leaves with the first body bytes."""
        st = self.st
        now = _perf()
        self.t_uphead = now
        self.status = head.status
        self.deadline = self.conn.plane.now + st.upstream_idle_s
        self.deadline_kind = D_UPSTREAM_IDLE
        self.server.failures = 0  # type: ignore[union-attr]  # the server answered: its failure streak ends
        block = head.block
        if head.connection:
            # fields the upstream named in Connection are hop-by-hop too
            block = header_stripper({t.decode("latin-1") for t in head.connection}).sub(b"", block)
        parts = [b"HTTP/1.1 ", head.status_text, block, b"\r\n"]
        close = not self.keep_alive or self.conn.closes_after(self) or not self.req_done or self.upgrade
        if has_body:
            if chunked:
                if self.decode_chunks:
                    close = True  # HTTP/1.0: the body ends with the connection
                else:
                    parts.append(b"transfer-encoding: chunked\r\n")
            elif head.content_length < 0:
                # read until the upstream closes: re-chunk it so the client connection survives
                if self.decode_chunks:
                    close = True
                else:
                    self.out_chunked = True
                    parts.append(b"transfer-encoding: chunked\r\n")
        parts += (st.via_id_10_line if head.version == b"HTTP/1.0" else st.via_id_11_line,
                  self.request_id.encode("latin-1"), b"\r\n")
        if st.debug_headers and self.verdict is not None:
            parts.append(st.verdict_headers(self.verdict)[1])
        if close:
            self.close_after = True
            parts.append(b"connection: close\r\n\r\n")
        elif self.request.version == "1.0":
            parts.append(b"connection: keep-alive\r\n\r\n")
        else:
            parts.append(b"\r\n")
        self.head_pending = b"".join(parts)
        self.added += (self.t_sent - self.t_head) + (_perf() - now)

    def on_response_body(self, data: bytes) -> None:
        """Response body bytes (already de-chunked when the client needs that)."""
        transport = self.conn.transport
        self.bytes_out += len(data)
        self.deadline = self.conn.plane.now + self.st.upstream_idle_s
        if self.out_chunked:
            pieces = chunk(data)
            if self.head_pending:
                pieces.insert(0, self.head_pending)
                self.head_pending = b""
                self.resp_started = True
            transport.writelines(pieces)  # type: ignore[union-attr]
        elif self.head_pending:
            head = self.head_pending
            self.head_pending = b""
            self.resp_started = True
            if len(data) <= 16384:
                transport.write(head + data)  # type: ignore[union-attr]
            else:
                transport.writelines((head, data))  # type: ignore[union-attr]
        else:
            transport.write(data)  # type: ignore[union-attr]

    def on_response_end(self, last: bytes = b"") -> None:
        """The upstream response is complete; ``last`` are its final body bytes (sized bodies only,
        so that a small response leaves in one write with its head)."""
        transport = self.conn.transport
        tail = LAST_CHUNK if self.out_chunked else b""
        if last:
            self.bytes_out += len(last)
        if self.head_pending:
            if len(last) <= 16384:
                transport.write(self.head_pending + last + tail)  # type: ignore[union-attr]
            else:
                transport.writelines((self.head_pending, last))  # type: ignore[union-attr]
            self.head_pending = b""
            self.resp_started = True
        elif last or tail:
            transport.write(last + tail if tail else last)  # type: ignore[union-attr]
        self.resp_done = True
        self.deadline_kind = D_NONE
        up = self.up
        self.up = None
        if up is not None:
            if not self.req_done:
                up.broken = True  # the rest of the request body would arrive as a new request
            up.release()
        self._server_done()
        if not self.req_done:
            # the upstream answered before the whole body arrived; stop forwarding it
            self.mode = B_DISCARD
            self.close_after = True
            self.conn.close_after_response(self)
            return
        self.finish()

    def on_upgrade(self, head: ResponseHead, rest: bytes) -> None:
        """101 Switching Protocols: from now on both connections are a byte tunnel."""
        st = self.st
        self.status = 101
        self.resp_started = True
        self.t_uphead = _perf()
        self.deadline_kind = D_NONE
        parts = [b"HTTP/1.1 ", head.status_text, st.upgrade_strip.sub(b"", head.raw_block), b"\r\nvia: ", st.via_11,
                 b"\r\n", st.id_header_out, b": ", self.request_id.encode("latin-1"), b"\r\n\r\n"]
        up = self.up
        assert up is not None and self.server is not None
        self.server.connect_succeeded()
        self.added += (self.t_sent - self.t_head)
        self.up = None
        self.conn.transport.write(b"".join(parts))  # type: ignore[union-attr]
        self.conn.start_tunnel(self, up, rest)

    def on_upstream_error(self, kind: str, detail: str, nothing_received: bool) -> None:
        """The upstream connection failed while this exchange used it."""
        up = self.up
        self.up = None
        backend = self.backend
        assert backend is not None
        _UPSTREAM_ERRORS.inc(backend.name, kind)
        self._server_done()
        if (kind == "reset" and nothing_received and up is not None and up.reused and self.request.body == NO_BODY
                and self.request.method in IDEMPOTENT_METHODS and not self.resp_started):
            # a pooled connection the server closed while idle: the request never got there
            # in a way that could have been processed; one more try on a new connection
            self.tried.pop()
            self.mode = B_BUFFER
            self._connect(True)
            return
        if self.resp_started:
            # part of the response is on its way: the client can only learn of the failure
            # from the connection closing early
            self.error = f"upstream_{kind}"
            log.warning("request %s: %s", self.request_id, detail)
            self.resp_done = True
            self.conn.abort()
            return
        self.head_pending = b""  # a head not yet sent is replaced by the error
        status = 504 if kind == "timeout" else 502
        self.fail(GatewayError(status, f"upstream_{kind}", detail))

    def upstream_write_paused(self, paused: bool) -> None:
        """The upstream's send buffer is full (or drained): pause (resume) reading the client."""
        if paused:
            self.conn.pause(P_UPLOAD)
        else:
            self.conn.resume(P_UPLOAD)

    def _server_done(self) -> None:
        if self.outstanding:
            self.outstanding = False
            self.server.outstanding -= 1  # type: ignore[union-attr]

    # ================================================================== deadlines

    def on_deadline(self) -> None:
        """The sweeper found this exchange past its deadline."""
        kind = self.deadline_kind
        self.deadline_kind = D_NONE
        up = self.up
        if kind == D_RESPONSE:
            if up is not None:
                up.abort()
            self.on_upstream_error("timeout", "The upstream did not respond in time.", False)
        elif kind == D_UPSTREAM_IDLE:
            if up is not None:
                up.abort()
            self.on_upstream_error("timeout", "The upstream stalled inside the response body.", False)

    # ================================================================== local responses

    def respond_local(self, response: LocalResponse) -> None:
        """Write a response the gateway made (challenge/block page, local endpoint)."""
        st = self.st
        body = response.body
        close = self._close_before_body()
        parts = [status_line(response.status), *_local_header_lines(response.content_type, response.headers, len(body)),
                 st.id_header_out, b": ", self.request_id.encode("latin-1"), b"\r\n"]
        if st.debug_headers and self.verdict is not None:
            parts.append(st.verdict_headers(self.verdict)[1])
        parts.append(b"connection: close\r\n\r\n" if close else b"\r\n")
        if not self.head_request:
            parts.append(body)
        self._write_final(response.status, b"".join(parts), 0 if self.head_request else len(body), close)

    def fail(self, error: GatewayError) -> None:
        """End the exchange with a gateway-made error response."""
        if self.task is not None:
            self.task.cancel()
            self.task = None
        if self.resp_started:
            self.error = error.reason
            self.conn.abort()
            return
        self.error = error.reason
        if error.status in (400, 408, 413, 417, 431, 501):
            _CLIENT_ERRORS.inc(error.reason)
        if error.status >= 500 and error.reason not in ("upstream_timeout", "upstream_connect", "no_healthy_backend"):
            log.warning("request %s: %d %s: %s", self.request_id, error.status, error.reason, error.detail)
        close = error.status < 500 or self._close_before_body()
        data = render_error(error.status, self.request_id, error.detail, id_header=self.st.id_header_out, close=close,
                            head_only=self.head_request)
        self._write_final(error.status, data, 0, close)

    def _close_before_body(self) -> bool:
        """Whether the connection closes after a response sent before the body was read."""
        if not self.keep_alive or self.conn.closes_after(self) or self.upgrade:
            return True
        if self.req_done or self.request.body == NO_BODY:
            return False
        if self.expect_continue and self.bytes_in == 0:
            return True  # the client waits for 100 Continue; it will not send the body now
        # a short remaining body is read and dropped; a long or unknown one ends the connection
        return self.request.body != LENGTH or self.body_left > DISCARD_MAX

    def _write_final(self, status: int, data: bytes, body_len: int, close: bool) -> None:
        if self.up is not None:
            self.up.abort()
            self.up = None
        self._server_done()
        self.status = status
        self.resp_started = True
        self.resp_done = True
        self.bytes_out += body_len
        self.deadline_kind = D_NONE
        self.pending = []
        self.buffered = 0
        self.mode = B_DISCARD
        self.added = _perf() - self.t_head
        transport = self.conn.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)
        # nothing more to wait for: read on (to drop the rest of the body, or the next request)
        self.conn.resume(P_WAIT | P_BUFFER)
        if close:
            self.close_after = True
        if self.req_done:
            self.finish()
        elif close:
            self.conn.close_after_response(self)

    # ================================================================== accounting

    def finish(self) -> None:
        """Both directions are complete: account and let the connection move on."""
        self.account()
        self.conn.exchange_done(self)

    def account(self) -> None:
        """Metrics, access-log line and pipeline observers for this exchange (once)."""
        if self.accounted:
            return
        self.accounted = True
        st = self.st
        verdict = self.verdict
        route = self.route
        backend = self.backend
        route_name = route.name if route is not None else ""
        backend_name = backend.name if backend is not None else ""
        status = self.status
        if verdict is not None:
            action = verdict.action._value_
            source = verdict.source._value_
        else:
            action = "local" if self.local else _NO_ACTION
            source = _GATEWAY
        _REQUESTS.inc(_STATUS.get(status, "0"), route_name, backend_name, action, source)
        _ADDED.observe(self.added)
        upstream_s = None
        if self.t_sent and self.t_uphead:
            upstream_s = self.t_uphead - self.t_sent
            _UPSTREAM.observe(upstream_s, backend_name)
        log_ = st.access_log
        features = self.features
        if log_.enabled:
            server = self.server
            log_.write(
                features.received_at if features is not None else time.time(), self.request_id,
                features.client_ip if features is not None else self.conn.peer, self.request.method,
                self.request.target.decode("latin-1"), status, self.bytes_in, self.bytes_out, route_name, backend_name,
                server.url if server is not None else "", action, source,
                verdict.rule if verdict is not None else None, verdict.score if verdict is not None else None,
                _perf() - self.t_head, upstream_s, self.added,
            )
        if verdict is not None and features is not None and st.pipeline.observers:
            try:
                st.pipeline.observe(features, verdict, status)
            except Exception:
                log.exception("a response observer raised")

    def client_gone(self) -> None:
        """The client connection closed before this exchange completed."""
        if self.task is not None:
            self.task.cancel()
            self.task = None
        up = self.up
        self.up = None
        if up is not None:
            up.abort()
        self._server_done()
        if not self.resp_done:
            self.status = 499
            self.error = self.error or "client_closed"
            self.resp_done = True
        self.account()


async def _as_awaitable(result: Awaitable[LocalResponse]) -> LocalResponse:
    return await result if inspect.isawaitable(result) else result


def _builtin_page(verdict: Verdict, request_id: str) -> LocalResponse:
    """The minimal page used when no page renderer is configured."""
    what = "challenged" if verdict.action is Action.CHALLENGE else "blocked"
    status = verdict.status if verdict.action is Action.BLOCK and verdict.status else 403
    body = (f"{status} Forbidden\nThis request was {what} by the gateway ({verdict.reason}).\n"
            f"request id: {request_id}\n").encode("utf-8", "replace")
    return LocalResponse(status, body, (("cache-control", "no-store"),), "text/plain; charset=utf-8")
