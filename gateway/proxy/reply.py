"""The half of an exchange that answers the client, and accounts for it.

:class:`Reply` holds the state of one request/response pair and writes what the
client gets: the upstream's interim and final response heads (hop-by-hop fields
cut; Via, the request id and the framing the client needs added) and body
(re-chunked when the upstream reads until close), the 101 that turns the
connection into a tunnel, the 100 Continue the gateway owes, the pages and
endpoint responses the gateway makes, and its errors. Once both directions are
done it accounts the exchange (metrics, access-log line, response observers).

:class:`~gateway.proxy.exchange.Exchange` adds the request half: the decision,
forwarding upstream and the request body. What the client asked is the
:class:`~gateway.proxy.head.RequestHead` in ``request``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from gateway import metrics
from gateway.proxy.errors import GatewayError, render_error
from gateway.proxy.head import LENGTH, NO_BODY, RequestHead
from gateway.proxy.http1 import LAST_CHUNK, ResponseHead, chunk, header_stripper, status_line
from gateway.verdict import LocalResponse, Verdict

if TYPE_CHECKING:
    from gateway.backends import Backend, Route, Server
    from gateway.features import Features
    from gateway.proxy.downstream import ClientConnection
    from gateway.proxy.settings import ProxySettings
    from gateway.proxy.upstream import UpstreamConnection

log = logging.getLogger("clefgate.proxy")

# what the exchange is doing with request body bytes as they arrive
B_BUFFER, B_FORWARD, B_DISCARD = 0, 1, 2

# why the exchange waits, for the deadline sweeper
D_NONE, D_RESPONSE, D_UPSTREAM_IDLE = 0, 1, 2

# pause reasons of the client connection (bit flags); P_EXCHANGE are cleared when an exchange ends
P_UPLOAD, P_WAIT, P_BUFFER, P_PIPELINE, P_UPGRADE = 1, 2, 4, 8, 16
P_EXCHANGE = P_UPLOAD | P_WAIT | P_BUFFER

# a request body smaller than this is read and dropped after an early response,
# keeping the connection; a larger one closes it (lingering)
DISCARD_MAX = 64 * 1024

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

_REQUESTS = metrics.REQUESTS
_ADDED = metrics.ADDED_LATENCY
_UPSTREAM = metrics.UPSTREAM_LATENCY
_CLIENT_ERRORS = metrics.CLIENT_ERRORS
PAGED = metrics.counter("clefgate_policy_pages_to_programs_total",
                        "Requests let through as a program's that ask for data (bot_likeness: ignore) that the site answered with a page "
                        "(text/html): the client's look counts again for an hour.")
# a response head's content type is a page
_PAGE = re.compile(rb"\r\ncontent-type:[ \t]*text/html", re.IGNORECASE)
_STATUS = {code: str(code) for code in range(100, 600)}
_perf = time.perf_counter

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


class Reply:
    """The state of one request/response pair on a client connection, and what the client is sent."""

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
        "head_pending",
        "head_request",
        "keep_alive",
        "local",
        "mode",
        "out_chunked",
        "outstanding",
        "pass_held",
        "pending",
        "req_done",
        "request",
        "request_id",
        "resp_done",
        "resp_started",
        "route",
        "scan",
        "server",
        "st",
        "status",
        "t_head",
        "t_sent",
        "t_uphead",
        "task",
        "tunnel_rest",
        "up",
        "upgrade",
        "verdict",
    )

    def __init__(self, conn: ClientConnection, st: ProxySettings, request: RequestHead, keep_alive: bool) -> None:
        self.conn = conn
        self.st = st
        self.request = request
        self.keep_alive = keep_alive
        # read by the upstream connection for every response
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
        self.close_after = False
        self.features: Features | None = None
        self.request_id = ""
        self.verdict: Verdict | None = None
        self.route: Route | None = None
        self.backend: Backend | None = None
        self.server: Server | None = None
        self.up: UpstreamConnection | None = None
        self.task: asyncio.Task[Any] | None = None
        self.head_pending = b""
        self.out_chunked = False
        self.tunnel_rest = b""  # what the client sent after an Upgrade request, written upstream after the 101
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
        self.pass_held = -1  # the difficulty of the client's valid pass for a site's step-up, -1 until read (Exchange._held)

    # ================================================================== 100 Continue

    def _send_continue(self) -> None:
        """A client that waits for 100 Continue (and sent no body byte yet) gets it, once."""
        if self.expect_continue and self.bytes_in == 0:
            self.expect_continue = False
            self.conn.transport.write(CONTINUE)  # type: ignore[union-attr]

    # ================================================================== response from upstream

    def on_interim(self, head: ResponseHead) -> None:
        """A 1xx response: 100 is ours to send (Expect is not forwarded); others pass to HTTP/1.1 clients."""
        if head.status == 100 or self.request.version == "1.0":
            return
        self.conn.transport.write(b"HTTP/1.1 " + head.status_text + head.block + b"\r\n\r\n")  # type: ignore[union-attr]

    def on_response_head(self, head: ResponseHead, has_body: bool, chunked: bool) -> None:
        """The final response head: build what the client gets; it leaves with the first body bytes."""
        if head.step_up is not None and self.step_up(head):
            return
        verdict = self.verdict
        if verdict is not None and verdict.look_ignored and 200 <= head.status < 300 and _PAGE.search(head.block) is not None:
            self._paged()
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

    def _paged(self) -> None:
        """A program let through as one that asks for data (its look not counted) was answered a page: the client's
        history says so, and its next such requests count its look again (``gateway.pipeline``)."""
        state, features = self.st.pipeline.state, self.features
        if state is not None and features is not None:
            state.history.paged(state.key(features))
            PAGED.inc()

    def step_up(self, head: ResponseHead) -> bool:
        """The site asked for a challenge (``challenge.step_up_header``): True when the exchange answered it instead."""
        return False

    def _server_done(self) -> None:
        if self.outstanding:
            self.outstanding = False
            self.server.outstanding -= 1  # type: ignore[union-attr]


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
        # the latency the gateway added; a page made once the site had answered (a step-up) leaves the site's time out
        now = _perf()
        self.added = now - self.t_head if not self.t_uphead else (self.t_sent - self.t_head) + (now - self.t_uphead)
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
            request = self.request
            log_.write(
                features.received_at if features is not None else time.time(), self.request_id,
                features.client_ip if features is not None else self.conn.peer, request.method,
                request.target.decode("latin-1"), status, self.bytes_in, self.bytes_out, route_name, backend_name,
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

