"""One request and its response: decide, forward or answer locally.

An :class:`Exchange` is created by the client connection when a request head is
complete (judged by :func:`gateway.proxy.head.parse_head`), and lives until both
the request body has been read and a response has been sent. Only the oldest
exchange of a connection is *active* (pipelined ones wait their turn), so
responses leave in request order.

This module is the request half: the decision (pipeline, model, local
endpoints), choosing a server and sending the request head and body upstream,
retries and upstream failures. What the client is sent and the accounting are
the :class:`~gateway.proxy.reply.Reply` it extends.

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
from typing import TYPE_CHECKING

from gateway import metrics
from gateway.proxy.errors import GatewayError
from gateway.proxy.head import CHUNKED, LENGTH, NO_BODY, RequestHead
from gateway.proxy.http1 import IDEMPOTENT_METHODS, LAST_CHUNK, ResponseHead, chunk
from gateway.proxy.reply import (
    B_BUFFER,
    B_DISCARD,
    B_FORWARD,
    D_NONE,
    D_RESPONSE,
    D_UPSTREAM_IDLE,
    P_BUFFER,
    P_UPLOAD,
    P_WAIT,
    Reply,
)
from gateway.proxy.upstream import PoolBusy, UpstreamConnection
from gateway.verdict import LOCAL_BODY_MAX, Action, LocalResponse, Source, Verdict

if TYPE_CHECKING:
    from gateway.backends import Server
    from gateway.proxy.downstream import ClientConnection
    from gateway.proxy.settings import ProxySettings

log = logging.getLogger("clefgate.proxy")

# bytes buffered for a request that cannot be forwarded yet before reading pauses
BUFFER_MAX = 64 * 1024

_UPSTREAM_ERRORS = metrics.UPSTREAM_ERRORS
STEP_UPS = metrics.counter("clefgate_challenge_step_ups_total",
                           "Responses with which the site asked for a challenge (challenge.step_up_header), by outcome: challenged (the "
                           "client got the challenge instead), passed (its pass was already enough: the site's answer went through).",
                           ("outcome",))
_CLIENT_ERRORS = metrics.CLIENT_ERRORS
_perf = time.perf_counter
_FORWARD = Action.FORWARD


class Exchange(Reply):
    """One request/response pair on a client connection: the request half."""

    __slots__ = ("fwd", "rejected", "started", "tried", "xff", "xfh", "xfp")

    def __init__(self, conn: ClientConnection, st: ProxySettings, request: RequestHead, keep_alive: bool) -> None:
        Reply.__init__(self, conn, st, request, keep_alive)
        self.started = False
        self.fwd = request.fwd  # the forwarded header block, every field behind CRLF (a trusted Forwarded is added)
        self.xff = b""
        self.xfp = b""
        self.xfh = b""
        self.tried: list[Server] = []
        # set when the head was refused; the error is the answer when the exchange's turn comes
        self.rejected: GatewayError | None = None

    # ================================================================== decision

    def start(self) -> None:
        """The exchange became the active one of its connection: decide and act."""
        self.started = True
        body = self.request.body
        if self.rejected is None and not self.local and not body:
            self._decide()  # the common case: a request without a body, decided on its head
            return
        if self.rejected is not None:
            self.fail(self.rejected)
            return
        if body == CHUNKED and self.bytes_in > self.st.max_body:
            self._body_too_large()
            return
        if self.local:
            self._start_local()
            return
        body_prefix = self.st.body_prefix
        if body_prefix and body != NO_BODY and not self.req_done and self.buffered < body_prefix:
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

    def _held(self) -> int:
        """The difficulty the client's pass holds for the site (0: none), read once, where a request goes to the site or
        the site asks for a step-up: a request the gateway answers itself never pays for it."""
        if self.pass_held < 0:
            passes, features = self.st.pipeline.passes, self.features
            self.pass_held = passes.pass_held(features) if passes is not None and features is not None else 0
        return self.pass_held

    def step_up(self, head: ResponseHead) -> bool:
        """The site's response asks for a challenge at ``head.step_up`` bits (empty: ``challenge.difficulty``): a client whose
        pass holds that much gets the site's answer (the field cut); any other gets the challenge instead, its request's
        form kept as a challenged request's is. The site's response is dropped with its connection."""
        passes, verdict, features = self.st.pipeline.passes, self.verdict, self.features
        if passes is None or verdict is None or features is None:
            return False
        text = head.step_up.decode("latin-1").strip().removeprefix("difficulty=") if head.step_up else ""
        # bits as asked, at most 32; empty or unreadable: challenge.difficulty
        asked = int(text) if text.isdigit() else 0
        difficulty = min(asked, 32) if asked >= 1 else passes.cfg.difficulty
        if self._held() >= difficulty:
            STEP_UPS.inc("passed")
            return False
        STEP_UPS.inc("challenged")
        self.t_uphead = _perf()
        self.server.failures = 0  # type: ignore[union-attr]  # the server answered
        reason = f"the site asked for a challenge at difficulty {difficulty} ({passes.cfg.step_up_header}) before it acts"
        # the site decided, not a rule or the model: the verdict names neither (shadow mode is the gateway's own decisions')
        self._apply(replace(verdict, action=Action.CHALLENGE, source=Source.ORIGIN, reason=reason, difficulty=difficulty, status=None,
                            rule=None, probabilities=None, policy=None, explanation=(reason,), shadow_action=None, headers=(),
                            look_ignored=False, payload=()))
        return True

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
        st = self.st
        pool = st.pools[server]
        if not fresh:
            idle = pool.idle
            while idle:
                up = idle.pop()
                if not up.broken:
                    self._send(up)
                    return
        self.conn.pause(P_WAIT)
        self.task = asyncio.ensure_future(pool.acquire(st.upstream_connect_s))
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
        request = self.request
        body = request.body
        self.up = up
        parts = [request.method_b, b" ", server.path_prefix, request.target, b" HTTP/1.1", self.fwd,
                 b"\r\nx-forwarded-for: ", self.xff, b"\r\nx-forwarded-proto: ", self.xfp, b"\r\nx-forwarded-host: ",
                 self.xfh, st.via_id_10 if request.version == "1.0" else st.via_id_11, self.request_id.encode("latin-1"),
                 b"\r\n", st.verdict_headers(verdict)[0]]
        if st.step_up and not verdict.headers and self._held():  # a challenge the pass turned into a forward names it already
            parts.append(b"x-clefgate-pass: difficulty=%d\r\n" % self.pass_held)
        if request.add_host:
            parts += (b"host: ", server.hostport.encode("latin-1"), b"\r\n")
        if body == LENGTH:
            parts.append(b"content-length: %d\r\n" % (request.content_length or 0))
        elif body == CHUNKED:
            parts.append(b"transfer-encoding: chunked\r\n")
        if self.upgrade:
            parts.append(b"connection: upgrade\r\nupgrade: websocket\r\n")
        parts.append(b"\r\n")
        head = b"".join(parts)
        if self.pending:
            out = [head]
            if body == CHUNKED:
                for piece in self.pending:
                    out += chunk(piece)
            else:
                out += self.pending
            self.pending = []
            self.buffered = 0
        else:
            out = [head]
        if self.req_done and body == CHUNKED:
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

    # ================================================================== request body

    def on_request_body(self, data: bytes) -> None:
        """Body bytes of this request, de-chunked by the parser."""
        n = len(data)
        self.bytes_in += n
        body = self.request.body
        if body == LENGTH:
            self.body_left -= n
        mode = self.mode
        if mode == B_FORWARD:
            self._request_moved()
            up = self.up
            if up is not None and up.transport is not None:
                if body == CHUNKED:
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
        if body == CHUNKED and self.bytes_in > self.st.max_body:
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

async def _as_awaitable(result: Awaitable[LocalResponse]) -> LocalResponse:
    return await result if inspect.isawaitable(result) else result


def _builtin_page(verdict: Verdict, request_id: str) -> LocalResponse:
    """The minimal page used when no page renderer is configured."""
    what = "challenged" if verdict.action is Action.CHALLENGE else "blocked"
    status = verdict.status if verdict.action is Action.BLOCK and verdict.status else 403
    body = (f"{status} Forbidden\nThis request was {what} by the gateway ({verdict.reason}).\n"
            f"request id: {request_id}\n").encode("utf-8", "replace")
    return LocalResponse(status, body, (("cache-control", "no-store"),), "text/plain; charset=utf-8")
