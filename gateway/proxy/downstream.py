"""The client side: one ``asyncio.Protocol`` per client connection, parsed by llhttp.

httptools calls back per header; the complete head is judged by the pure
:func:`gateway.proxy.head.parse_head` (validation, framing, target and Host, the
header block forwarded upstream as raw bytes, never re-encoded), and
:meth:`ClientConnection.on_headers_complete` acts on its answer: it queues the
exchange (or the refusal), adds who is asking (client address, trusted proxies)
and builds ``Features``. Requests are queued in arrival order and answered in that order;
only the oldest is active. Reading pauses while the pipeline awaits the model,
while a new upstream connection opens, when too many pipelined requests wait,
and when the upstream cannot take more body bytes.

Errors in the head (malformed, ambiguous framing, too large, too slow) are
answered in order with a gateway error, after which the connection is closed
with a *lingering close*: our side is shut for writing and unread input is
drained for ``timeouts.lingering_close_s``, so the client reads the error instead
of a reset.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, NoReturn, cast

import httptools

from gateway import metrics
from gateway.proxy.errors import GatewayError
from gateway.proxy.exchange import Exchange
from gateway.proxy.head import CHUNKED, HeadError, RequestHead, line_only, parse_head
from gateway.proxy.reply import P_EXCHANGE, P_PIPELINE, P_UPGRADE, Reply
from gateway.proxy.requestid import REQUEST_IDS
from gateway.proxy.tunnel import Tunnel
from gateway.proxy.wirefeatures import new_features

if TYPE_CHECKING:
    from gateway.proxy import DataPlane
    from gateway.proxy.settings import ProxySettings
    from gateway.proxy.upstream import UpstreamConnection

log = logging.getLogger("clefgate.proxy")

_OPEN = metrics.OPEN_CONNECTIONS

# what the connection-level deadline means
C_NONE, C_IDLE, C_HEAD, C_BODY, C_LINGER, C_TUNNEL = range(6)

_HttpParserError = httptools.HttpParserError
_HttpParserUpgrade = httptools.HttpParserUpgrade
_HttpParserCallbackError = httptools.HttpParserCallbackError
_time = time.time
_new_id = REQUEST_IDS.new
_accept_id = REQUEST_IDS.accept
HEADER_ABUSE = metrics.counter(
    "clefgate_request_header_abuse_total",
    "Requests whose head tried to remove or shadow a field the origin relies on, by kind (connection_listed: a "
    "protected field named in Connection, kept; underscore: an underscore twin of a guarded field) and action "
    "(kept, refused, dropped).", ("kind", "action"))


def _count_abuse(head: RequestHead | HeadError, request_id: str) -> None:
    """Count (and log) what a head tried to remove or shadow: fields named in Connection, underscore twins dropped."""
    kept = head.kept
    if kept:
        HEADER_ABUSE.inc("connection_listed", "kept")
        log.info("a client's Connection header named fields the origin relies on; they are kept",
                 extra={"fields": {"request_id": request_id, "fields": sorted(kept)[:8]}})
    if head.twins_dropped:
        HEADER_ABUSE.inc("underscore", "dropped")


class ClientConnection(asyncio.Protocol):
    """One client connection: parses requests and runs their exchanges in order."""

    __slots__ = (
        "closing",
        "deadline",
        "deadline_kind",
        "draining",
        "eof",
        "gone",
        "head_seen",
        "headers",
        "in_head",
        "last_host",
        "msg_open",
        "parser",
        "paused",
        "peer",
        "peer_b",
        "plane",
        "queue",
        "raw_head",
        "reading",
        "st",
        "transport",
        "tunnel",
        "upgrade_ex",
        "url",
        "write_paused",
    )

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.peer_b = b""
        self.queue: deque[Exchange] = deque()
        self.reading: Exchange | None = None
        self.upgrade_ex: Exchange | None = None
        self.st: ProxySettings = plane.settings()
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.raw_head: bytes | None = None
        self.msg_open = False
        self.in_head = True
        self.head_seen = 0
        self.deadline = 0.0
        self.deadline_kind = C_IDLE
        self.paused = 0
        self.write_paused = False
        self.draining = False
        self.closing = False
        self.gone = False
        self.eof = False
        self.tunnel: Tunnel | None = None
        self.last_host = ""

    # ================================================================== asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        ip = peer[0] if isinstance(peer, tuple) and peer else ""
        if ip.startswith("::ffff:") and "." in ip:
            ip = ip[7:]
        self.peer = ip
        self.peer_b = ip.encode("latin-1")
        transport.set_write_buffer_limits(high=256 * 1024)  # type: ignore[attr-defined]
        self.plane.connections.add(self)
        _OPEN.inc("client")
        # a connection that sends nothing is closed after the head timeout, silently
        self.deadline = self.plane.now + self.st.header_read_s
        self.deadline_kind = C_IDLE
        if self.plane.draining:
            self.draining = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        self.plane.connection_closed(self)
        _OPEN.dec("client")
        if self.tunnel is not None:
            self.tunnel.client_closed()
        for ex in self.queue:
            if ex.started:
                ex.client_gone()
        self.queue.clear()
        self.reading = None

    def eof_received(self) -> bool:
        # the client half-closed: finish what is in flight (responses can still be written),
        # then close; an idle or lingering connection closes now
        self.eof = True
        if self.tunnel is not None:
            return self.tunnel.client_eof()
        if self.closing or not self.queue:
            return False
        self.draining = True
        return True

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.tunnel is not None:
            self.tunnel.pause_upstream()
            return
        if self.queue:
            up = self.queue[0].up
            if up is not None:
                up.pause_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.tunnel is not None:
            self.tunnel.resume_upstream()
            return
        if self.queue:
            up = self.queue[0].up
            if up is not None:
                up.resume_reading()

    def data_received(self, data: bytes) -> None:
        # what follows an Upgrade request that is not tunnelled (h2c, ...) is read again in this loop: a pipelined run
        # of them must not recurse (nor nest exception handlers) once per request
        while data:
            data = self._feed(data)

    def _feed(self, data: bytes) -> bytes:
        """Parse ``data``; the bytes to parse next (after an Upgrade served as plain HTTP), or b""."""
        if self.tunnel is not None:
            self.tunnel.from_client(data)
            return b""
        if self.closing:
            return b""  # lingering close: drop whatever the client still sends
        if self.draining and self.in_head and not self.msg_open and not self.head_seen:
            return b""  # draining: a request that starts now is not read (the last answer said Connection: close)
        if self.in_head:
            if not self.msg_open and not self.head_seen:
                # a new request starts at data[0]: keep its raw head when it is complete here,
                # so the forwarded header block is cut from it instead of rebuilt field by field
                self.deadline = self.plane.now + self.st.header_read_s
                self.deadline_kind = C_HEAD
                first = data[0]
                if first != 13 and first != 10:
                    end = data.find(b"\r\n\r\n")
                    if end > 0:
                        self.raw_head = data[:end]
            self.head_seen += len(data)
        upgraded = None
        try:
            self.parser.feed_data(data)
        except _HttpParserUpgrade as exc:
            upgraded = data[exc.args[0]:]
        except _HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, GatewayError):
                self.reject(cause)
            else:
                log.error("request handling failed: %r", cause, exc_info=cause)
                self.reject(GatewayError(500, "internal", "The gateway failed while reading the request."))
        except _HttpParserError as exc:
            self.reject(GatewayError(400, "malformed", f"Malformed request: {exc}."))
        else:
            # a head still incomplete after this much input is refused before it grows further
            # (httptools buffers a field until it is complete)
            if self.in_head and self.msg_open and self.head_seen > self.st.max_head_total:
                self.reject(GatewayError(431, "header_too_large", "The request head exceeds the configured limits."))
        return b"" if upgraded is None else self._upgraded(upgraded)

    # ================================================================== httptools callbacks

    def on_message_begin(self) -> None:
        self.msg_open = True
        self.st = self.plane.settings()  # the Runtime this request lives with (read once per request)
        self.url = b""
        self.headers = []

    def on_url(self, url: bytes) -> None:
        if self.url:
            url = self.url + url
        self.url = url
        if len(url) > self.st.max_request_line:
            raise GatewayError(431, "request_line_too_long", "The request line exceeds limits.max_request_line_bytes.")

    def on_header(self, name: bytes, value: bytes) -> None:
        # sizes are checked once per head (the raw byte count bounds memory meanwhile)
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        st = self.st
        parser = self.parser
        raw_head = self.raw_head
        self.raw_head = None
        self.in_head = False
        self.head_seen = 0
        method_b = parser.get_method()
        version = parser.get_http_version()
        head = parse_head(st.head_rules, method_b, self.url, version, self.headers, raw_head, parser.should_upgrade(),
                          self.last_host)
        if isinstance(head, HeadError):
            self._refuse_head(head, method_b, version)
        ex = Exchange(self, st, head, parser.should_keep_alive())
        self.queue.append(ex)
        self.reading = ex
        rid = head.client_id
        request_id = ex.request_id = _new_id() if rid is None else _accept_id(rid)
        if head.kept or head.twins_dropped:
            _count_abuse(head, request_id)
        if head.body:
            self.deadline_kind = C_BODY
            self.deadline = self.plane.now + st.client_body_s
        host = head.host
        if not head.add_host:
            self.last_host = host
        if head.upgrade:
            self.upgrade_ex = ex
        # ---- who is asking, and how they reached the proxies in front of us
        peer = self.peer
        hmap = head.header_map
        get = hmap.get
        host_b = host.encode("latin-1")
        if st.has_trusted and peer in st.trusted:
            xff_in = get("x-forwarded-for")
            client_ip = st.trusted.client_ip(peer, xff_in, get("forwarded"))
            ex.xff = (xff_in + ", " + peer).encode("latin-1") if xff_in else self.peer_b
            scheme = st.public_scheme or get("x-forwarded-proto", "http").split(",")[0].strip().lower()
            xfh = get("x-forwarded-host")
            ex.xfh = host_b if xfh is None else xfh.encode("latin-1")
            fwd_hdr = get("forwarded")
            if fwd_hdr is not None:
                ex.fwd += b"\r\nforwarded: " + fwd_hdr.encode("latin-1")
            ex.xfp = scheme.encode("latin-1")
        else:
            client_ip = peer
            ex.xff = self.peer_b
            scheme = st.scheme
            ex.xfh = host_b
            ex.xfp = st.scheme_b
        path = head.path
        ex.features = new_features(
            head.method, path, head.query, version, head.headers, hmap, client_ip, peer, host, get("user-agent", ""),
            head.content_length, head.body == CHUNKED, scheme, request_id, _time(), st.client_key(client_ip, hmap),
        )
        local = st.local_prefix
        if local is not None and path.startswith(local):
            ex.local = True
        else:
            ex.route = st.backends.route(host, path)
        if len(self.queue) == 1:
            ex.start()
        elif len(self.queue) > st.max_pipelined:
            self.pause(P_PIPELINE)

    def _refuse_head(self, error: HeadError, method_b: bytes, version: str) -> NoReturn:
        """Queue the refused request and raise its error out of the parser: ``reject`` answers it in its turn."""
        st = self.st
        ex = Exchange(self, st, line_only(method_b, error.target or self.url, version), self.parser.should_keep_alive())
        self.queue.append(ex)
        self.reading = ex
        rid = error.client_id
        ex.request_id = _new_id() if rid is None else _accept_id(rid)
        _count_abuse(error, ex.request_id)
        if error.reason == "ambiguous_header_name":
            HEADER_ABUSE.inc("underscore", "refused")
        if error.body:
            # refused after its framing was read: the connection waits for a body, not for a head
            self.deadline_kind = C_BODY
            self.deadline = self.plane.now + st.client_body_s
        raise GatewayError(error.status, error.reason, error.detail)

    def on_body(self, body: bytes) -> None:
        ex = self.reading
        if ex is not None:
            self.deadline = self.plane.now + self.st.client_body_s
            ex.on_request_body(body)

    def on_message_complete(self) -> None:
        ex = self.reading
        self.reading = None
        self.in_head = True
        self.msg_open = False
        # no client deadline while its response is pending (exchange_done sets the idle one)
        self.deadline_kind = C_NONE
        if ex is not None:
            ex.on_request_end()

    # ================================================================== flow control

    def pause(self, reason: int) -> None:
        """Stop reading the client for ``reason`` (a P_* flag)."""
        if not self.paused and self.transport is not None and not self.closing:
            self.transport.pause_reading()
        self.paused |= reason

    def resume(self, reasons: int) -> None:
        """Clear ``reasons``; read again when no reason is left."""
        if self.paused & reasons:
            self.paused &= ~reasons
            if not self.paused and self.transport is not None and not self.gone:
                self.transport.resume_reading()

    # ================================================================== exchange lifecycle

    def exchange_done(self, ex: Reply) -> None:
        """An exchange sent its response and read its request: start the next one."""
        queue = self.queue
        if queue and queue[0] is ex:
            queue.popleft()
        elif ex in queue:
            queue.remove(cast("Exchange", ex))  # every Reply is an Exchange's
        self.resume(P_EXCHANGE)
        if self.gone:
            return
        ends = ex.close_after or not ex.keep_alive
        if queue and not ends:
            # Requests already read are answered in order, also while the connection drains, after the client
            # half-closed, or when a later one was refused (that one answers with its error, then closes).
            if len(queue) <= self.st.max_pipelined:
                self.resume(P_PIPELINE)
            # from the loop, not from here: a long pipeline answered without the upstream would recurse
            self.plane.loop.call_soon(self._start_next)
            return
        if ends or self.draining or self.closing:
            linger = bool(queue) or self.reading is not None or self.head_seen > 0 or not ex.req_done or ex.status in (
                400, 408, 413, 417, 431, 501, 505)
            self.shutdown(linger)
            return
        if self.reading is None and self.in_head:
            if self.msg_open or self.head_seen:
                # the next request's head is arriving (it may have come with this one's): the head's limit
                # applies, with its 408, not the idle keep-alive one
                self.deadline = self.plane.now + self.st.header_read_s
                self.deadline_kind = C_HEAD
            else:
                self.deadline = self.plane.now + self.st.keepalive_s
                self.deadline_kind = C_IDLE

    def _start_next(self) -> None:
        queue = self.queue
        if not self.gone and queue and not queue[0].started:
            queue[0].start()

    def closes_after(self, ex: Reply) -> bool:
        """Whether the connection drains and ``ex`` is the last request it has read (whole head) or is reading: a
        draining connection answers every one up to it and says ``Connection: close`` on that one's response."""
        return self.draining and all(other is ex for other in self.queue)

    def close_after_response(self, ex: Reply) -> None:
        """``ex`` answered before its request body was read: account it, then close."""
        ex.account()
        if self.queue and self.queue[0] is ex:
            self.queue.popleft()
        self.reading = None
        self.shutdown(True)

    def shutdown(self, linger: bool) -> None:
        """Close after everything written so far; with ``linger``, drain unread input first."""
        if self.gone or self.transport is None:
            return
        self.closing = True
        for ex in self.queue:
            if ex.started and not ex.accounted:
                ex.client_gone()
        self.queue.clear()
        transport = self.transport
        if linger and not self.eof and self.st.lingering_s > 0 and transport.can_write_eof():
            self.paused = 0
            transport.resume_reading()
            transport.write_eof()
            self.deadline = self.plane.now + self.st.lingering_s
            self.deadline_kind = C_LINGER
        else:
            transport.close()

    def abort(self) -> None:
        """Drop the connection at once (a response already started cannot be finished)."""
        if self.transport is not None and not self.gone:
            self.closing = True
            self.transport.abort()

    def reject(self, error: GatewayError) -> None:
        """A request the parser cannot continue past: answer it in order, then close."""
        ex = self.reading
        if ex is not None and ex.resp_started:
            # the error is in the body of a request already being answered
            ex.error = error.reason
            self.abort()
            return
        if ex is None:
            ex = Exchange(self, self.st, line_only(b"-", self.url, "1.1"), False)
            self.queue.append(ex)
        if not ex.request_id:
            ex.request_id = REQUEST_IDS.new()
        ex.rejected = error
        ex.keep_alive = False
        ex.req_done = True
        self.reading = None
        self.closing = True  # the parser is unusable: further input is dropped
        if self.queue[0] is ex:
            ex.started = True
            ex.fail(error)
        # else: answered when its turn comes (earlier pipelined requests are in flight)

    def _upgraded(self, rest: bytes) -> bytes:
        """After an Upgrade request's head: the bytes to parse next (an Upgrade we do not tunnel), or b""."""
        ex = self.upgrade_ex
        self.upgrade_ex = None
        if ex is None or ex.resp_done or self.closing:
            if rest and not self.closing and ex is None:
                # an Upgrade we do not tunnel (h2c, ...): the request was served as plain HTTP
                return rest
            return b""
        ex.tunnel_rest += rest
        self.pause(P_UPGRADE)
        return b""

    def start_tunnel(self, ex: Reply, up: UpstreamConnection, rest: bytes) -> None:
        """101 from the upstream: this connection becomes a byte tunnel."""
        tunnel = Tunnel(self, up, ex, self.st.tunnel_idle_s)
        self.tunnel = tunnel
        ex.resp_done = True
        if ex.tunnel_rest and up.transport is not None:
            up.transport.write(ex.tunnel_rest)
            ex.bytes_in += len(ex.tunnel_rest)
            ex.tunnel_rest = b""
        if rest:
            tunnel.from_upstream(rest)
        self.deadline_kind = C_TUNNEL
        self.paused = 0
        if self.eof:  # the client half-closed while the upgrade was pending
            tunnel.client_eof()
        if self.transport is not None:
            self.transport.resume_reading()

    # ================================================================== deadlines

    def check_deadlines(self, now: float) -> None:
        """Called by the sweeper with the loop's time."""
        kind = self.deadline_kind
        if kind == C_TUNNEL:
            tunnel = self.tunnel
            if tunnel is not None and now >= tunnel.deadline:
                tunnel.idle_timeout()
            return
        if kind != C_NONE and now >= self.deadline:
            if kind == C_BODY and (self.paused or self.reading is None):
                # we are the ones not reading (backpressure, waiting to decide)
                self.deadline = now + self.st.client_body_s
            elif kind == C_BODY:
                self.deadline_kind = C_NONE
                ex = self.reading
                if ex is not None and not ex.resp_started and self.queue and self.queue[0] is ex:
                    ex.fail(GatewayError(408, "body_timeout", "The request body stalled."))
                elif ex is not None and not ex.started:
                    # pipelined behind a request still being answered: that answer is not cut, this one's 408
                    # follows it, then the connection closes
                    self.reject(GatewayError(408, "body_timeout", "The request body stalled."))
                else:
                    self.abort()
                return
            elif kind == C_HEAD:
                self.deadline_kind = C_NONE
                self.reject(GatewayError(408, "header_timeout", "The request head was not received in time."))
                return
            else:  # idle keep-alive, lingering close
                self.deadline_kind = C_NONE
                if self.transport is not None:
                    self.transport.close() if kind == C_IDLE else self.transport.abort()
                return
        if self.queue:
            ex = self.queue[0]
            if ex.deadline_kind and now >= ex.deadline:
                if self.write_paused and ex.deadline_kind == 2:
                    ex.deadline = now + ex.st.upstream_idle_s  # the client is slow, not the upstream
                else:
                    ex.on_deadline()

    def start_drain(self) -> None:
        """Graceful shutdown: close now when idle, else after the current response."""
        self.draining = True
        if not self.queue and not self.head_seen and self.reading is None and self.transport is not None:
            self.closing = True
            self.transport.close()

