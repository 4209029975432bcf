"""A lean HTTP/1.1 client for the traffic simulator: keep-alive pools over loopback sockets.

Each simulated session owns one :class:`ConnectionPool` (a browser keeps a handful of
connections per host; a scraper one; some libraries a new one per request), so
connection reuse looks like the client it imitates. Requests are written as raw bytes
with the header names, order and spelling the session chose (the gateway's features
read wire order), and responses are parsed with ``httptools`` (llhttp), the same parser
family the gateway uses, so the load generator spends little CPU per request.

Latency is measured from the moment a connection is in hand (a new connection's
connect time included, as a browser would feel it) to the last byte of the response.
Failures raise :class:`RequestFailed` with a short ``kind`` (connect, reset, timeout,
protocol) for the error counts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httptools

Headers = Sequence[tuple[str, str]]


class RequestFailed(Exception):
    """No complete response: ``kind`` is connect, reset, timeout or protocol."""

    def __init__(self, kind: str, detail: str = "") -> None:
        self.kind = kind
        super().__init__(f"{kind}: {detail}" if detail else kind)


@dataclass(slots=True)
class Response:
    """One complete response. Header names are lower-case; repeated ``set-cookie`` values are kept apart."""

    status: int
    headers: dict[str, str]
    body: bytes
    latency_s: float
    set_cookies: list[str] = field(default_factory=list)
    new_connection: bool = False

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name, default)


class _Connection(asyncio.Protocol):
    """One client connection: one request at a time, parsed with httptools."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.keep_alive = True
        self._waiter: asyncio.Future[Response] | None = None
        self._reset()

    def _reset(self) -> None:
        self._headers: dict[str, str] = {}
        self._cookies: list[str] = []
        self._body: list[bytes] = []
        self._status = 0
        self._head_done = False

    # ---- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(RequestFailed("protocol", "unexpected upgrade"))
        except httptools.HttpParserError as exc:
            self._fail(RequestFailed("protocol", str(exc)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._head_done and "content-length" not in self._headers and "chunked" not in self._headers.get("transfer-encoding", ""):
            self.on_message_complete()  # a body delimited by the end of the connection
            return
        waiter.set_exception(RequestFailed("reset", str(exc) if exc else "connection closed before the response ended"))

    # ---- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "set-cookie":
            self._cookies.append(text)
        elif key in self._headers:
            self._headers[key] += ", " + text
        else:
            self._headers[key] = text

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()
        self._head_done = True
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._status, self._headers, b"".join(self._body), 0.0, self._cookies))
        self._reset()

    def _fail(self, exc: RequestFailed) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    # ---- use
    async def exchange(self, raw: bytes) -> Response:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(raw)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def encode_request(method: str, target: str, headers: Headers, body: bytes = b"") -> bytes:
    """The request bytes exactly as given (names, order), plus Content-Length for a body."""
    lines = [f"{method} {target} HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body and not any(n.lower() == "content-length" for n, _ in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body


class ConnectionPool:
    """Up to ``max_connections`` keep-alive connections to one address, reused like a browser's.

    ``reuse=False`` opens a new connection per request (a script without a session).
    """

    def __init__(self, host: str, port: int, *, max_connections: int = 2, reuse: bool = True,
                 connect_timeout_s: float = 5.0) -> None:
        self.host = host
        self.port = port
        self.max_connections = max(1, max_connections)
        self.reuse = reuse
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[_Connection] = []
        self._open = 0
        self._slots = asyncio.Semaphore(self.max_connections)
        self.connections_opened = 0

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(_Connection, self.host, self.port)
        except TimeoutError:
            raise RequestFailed("timeout", "connect") from None
        except OSError as exc:
            raise RequestFailed("connect", exc.strerror or str(exc)) from None
        self.connections_opened += 1
        return conn

    async def request(self, method: str, target: str, headers: Headers, body: bytes = b"", *,
                      timeout_s: float = 15.0) -> Response:
        """Send one request and return its complete response (raises RequestFailed)."""
        raw = encode_request(method, target, headers, body)
        async with self._slots:
            conn = None
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.closed:
                    conn = candidate
                    break
            start = time.perf_counter()
            fresh = conn is None
            if conn is None:
                conn = await self._connect()
            try:
                async with asyncio.timeout(timeout_s):
                    response = await conn.exchange(raw)
            except TimeoutError:
                conn.close()
                raise RequestFailed("timeout", f"no complete response within {timeout_s:g}s") from None
            except BaseException:
                conn.close()
                raise
            response.latency_s = time.perf_counter() - start
            response.new_connection = fresh
            if self.reuse and conn.keep_alive and not conn.closed:
                self._idle.append(conn)
            else:
                conn.close()
            return response

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()


class CookieJar:
    """The cookies a browser keeps for one site (name -> value; attributes ignored)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def store(self, set_cookies: Sequence[str]) -> None:
        for line in set_cookies:
            pair = line.split(";", 1)[0]
            name, sep, value = pair.partition("=")
            if sep and name.strip():
                if "max-age=0" in line.lower():
                    self.values.pop(name.strip(), None)
                else:
                    self.values[name.strip()] = value.strip()

    def header(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.values.items())

    def __bool__(self) -> bool:
        return bool(self.values)
